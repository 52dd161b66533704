// Package playground holds the web playground's assets (HTML, CSS,
// JavaScript, and CodeMirror copied in by make assets), embedded in the
// binary: nothing is fetched from elsewhere at run time.
package playground

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// Static is the playground's file tree: index.html and static/...
func Static() fs.FS {
	sub, _ := fs.Sub(files, "static")
	return sub
}
