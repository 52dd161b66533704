// Package layers pins how srt-mcp's packages may import each other (its
// test reads every package's imports): the doors speak only to the
// service, the guard and the error vocabulary; the lower half never
// imports the upper; the service knows nothing of HTTP. See the README's
// "How it is built" for the picture.
package layers
