package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/sessions"
)

var auditCommand = &cli.Command{
	Name:      "audit",
	Usage:     "print a data session's audit log (executions, file operations, network decisions)",
	ArgsUsage: "[SESSION_ID]",
	Description: `Without an argument, lists the sessions that have an audit log. With a
session id, prints that session's log: one JSON object per line.
Audit logs outlive their sessions; they live in STATE_DIR/audit.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "state-dir", EnvVars: []string{"SANDBOX_STATE_DIR", "SANDBOX_ROOT"}, Usage: "the server's state directory"},
	},
	Action: runAudit,
}

func runAudit(c *cli.Context) error {
	stateDir := c.String("state-dir")
	if stateDir == "" {
		home, _ := os.UserHomeDir()
		stateDir = defaultStateDir(home)
	}
	dir := sessions.AuditDir(stateDir)
	if c.NArg() == 0 {
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			return cli.Exit(err.Error(), 1)
		}
		var rows []string
		for _, e := range ents {
			id, ok := strings.CutSuffix(e.Name(), ".jsonl")
			if !ok {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%d lines", id, fi.ModTime().UTC().Format("2006-01-02T15:04:05Z"), countLines(filepath.Join(dir, e.Name()))))
		}
		sort.Strings(rows)
		if len(rows) == 0 {
			fmt.Fprintf(c.App.Writer, "no audit logs in %s\n", dir)
		}
		for _, r := range rows {
			fmt.Fprintln(c.App.Writer, r)
		}
		return nil
	}
	id := c.Args().First()
	if _, err := sessions.CleanName(id); err != nil || strings.ContainsAny(id, "/.") {
		return cli.Exit(fmt.Sprintf("%q is not a session id (sess_ + 12 hex digits)", id), exitUsage)
	}
	f, err := os.Open(sessions.AuditPath(stateDir, id))
	if err != nil {
		return cli.Exit(fmt.Sprintf("no audit log for %s in %s", id, dir), 1)
	}
	defer f.Close()
	_, err = io.Copy(c.App.Writer, f)
	return err
}

func countLines(p string) int {
	f, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		n++
	}
	return n
}
