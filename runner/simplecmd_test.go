package runner

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// simpleCommands are commands SimpleCommand must split, with the words.
var simpleCommands = map[string][]string{
	`python3 -c 'print(1)'`:                         {"python3", "-c", "print(1)"},
	`python3 -c "print(1)"`:                         {"python3", "-c", "print(1)"},
	"  ls\t-la  /tmp ":                              {"ls", "-la", "/tmp"},
	`pip install pandas==2.2.0`:                     {"pip", "install", "pandas==2.2.0"},
	`./run.sh a'b c'd "e f"`:                        {"./run.sh", "ab cd", "e f"},
	`node -e 'console.log("$HOME; ` + "`x`" + `")'`: {"node", "-e", `console.log("$HOME; ` + "`x`" + `")`},
	`cmd '' ""`:                                     {"cmd", "", ""},
	`gcc -O2 -o /tmp/a.out x.c -lm`:                 {"gcc", "-O2", "-o", "/tmp/a.out", "x.c", "-lm"},
	`curl -sS https://pypi.org/simple/a,b+c@d%e:f`:  {"curl", "-sS", "https://pypi.org/simple/a,b+c@d%e:f"},
	`python3 -c 'print("é")'`:                       {"python3", "-c", `print("é")`},
}

// shellCommands are commands only the shell may run.
var shellCommands = []string{
	"", "   ", "''", `""`,
	"echo hi", "cd /tmp", "true", "exit 3", "time ls", "! ls", "[ -e x ]", "command ls", "exec ls", "source x", ". x",
	"FOO=1 env", "ls; pwd", "ls && pwd", "ls || pwd", "ls | wc", "ls &", "ls > f", "ls < f", "ls 2>&1",
	"ls $HOME", "ls ${HOME}", "ls `pwd`", "ls $(pwd)", `ls "$HOME"`, `ls "a\"b"`, `ls "a!b"`, `ls a\ b`,
	"ls *.py", "ls ?", "ls [ab]", "ls ~", "ls ~/x", "ls {a,b}", "ls # comment", "ls\npwd", "ls (x)",
	"ls 'unterminated", `ls "unterminated`, "ls a^b", "ls \x00",
}

func TestSimpleCommand(t *testing.T) {
	for cmd, want := range simpleCommands {
		got, ok := SimpleCommand(cmd)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("SimpleCommand(%q) = %q, %v; want %q", cmd, got, ok, want)
		}
	}
	for _, cmd := range shellCommands {
		if got, ok := SimpleCommand(cmd); ok {
			t.Errorf("SimpleCommand(%q) = %q; only the shell may run it", cmd, got)
		}
	}
}

// TestSimpleCommandAgreesWithBash has bash itself split every command
// SimpleCommand accepts (as a function call's arguments) and compares.
func TestSimpleCommandAgreesWithBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	cmds := []string{}
	for c := range simpleCommands {
		cmds = append(cmds, c)
	}
	// Near misses of the shell's syntax that SimpleCommand accepts must
	// split the same way too.
	cmds = append(cmds, `a b=c`, `a -- --x=y`, `a 'x''y'`, `a "x"'y'z`, `a %s%%`, `a :`, `a ,`, `a @`, `a +1`, `a -`, `a .`, `a ..`)
	for _, cmd := range cmds {
		want, ok := SimpleCommand(cmd)
		if !ok {
			t.Errorf("SimpleCommand(%q) refused it", cmd)
			continue
		}
		// bash prints the words of "f CMD", f a function that prints
		// its arguments.
		script := "f() { printf '%s\\0' \"$@\"; }; f " + cmd
		out, err := exec.Command(bash, "-c", script).Output()
		if err != nil {
			t.Errorf("bash -c %q: %v", script, err)
			continue
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: bash splits it into %q, SimpleCommand into %q", cmd, got, want)
		}
	}
}

func TestBashEnviron(t *testing.T) {
	env, ok := bashEnviron([]string{"A=1", "PATH=/bin", "_=x"}, "/w", "/bin/env")
	want := []string{"A=1", "PATH=/bin", "PWD=/w", "SHLVL=0", "_=/bin/env"}
	if !ok || !reflect.DeepEqual(env, want) {
		t.Errorf("got %q %v, want %q", env, ok, want)
	}
	if env, ok := bashEnviron([]string{"SHLVL=4", "PWD=/w"}, "/w", "/p"); !ok || !reflect.DeepEqual(env, []string{"PWD=/w", "SHLVL=4", "_=/p"}) {
		t.Errorf("got %q %v", env, ok)
	}
	for _, kv := range []string{"BASH_ENV=/x", "ENV=/x", "SHELLOPTS=xtrace", "BASHOPTS=x", "POSIXLY_CORRECT=1",
		"BASH_FUNC_python3%%=() { :; }", "PWD=/elsewhere", "SHLVL=999", "SHLVL=-1", "SHLVL=x", "SHLVL=01"} {
		if _, ok := bashEnviron([]string{"PATH=/bin", kv}, "/w", "/p"); ok {
			t.Errorf("%s: bash would act on it; the shell must run the command", kv)
		}
	}
}
