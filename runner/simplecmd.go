package runner

import (
	"strconv"
	"strings"
)

// SimpleCommand splits a shell command into the words bash would run it
// with, when bash would run it as one program and nothing else: words of
// letters, digits and -_./:,+@%= that may be quoted with '...' or with
// "..." (no $, `, \ or ! inside), separated by spaces or tabs, the first
// word neither an assignment nor a shell keyword or builtin. Anything else
// (expansion, globbing, redirection, pipes, lists, comments, a tilde, a
// newline) reports false: the shell must run it.
//
// bash -c runs such a command by exec'ing the program in place of itself,
// so running the program directly is the same process with the same
// arguments, minus bash's start (Spec.Direct). Perl's exec and Ruby's
// spawn skip the shell for commands like these in the same way.
func SimpleCommand(cmd string) ([]string, bool) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(cmd); {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			w.WriteString(cmd[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '"':
			end := strings.IndexByte(cmd[i+1:], '"')
			if end < 0 {
				return nil, false
			}
			s := cmd[i+1 : i+1+end]
			if strings.ContainsAny(s, "$`\\!") {
				return nil, false
			}
			w.WriteString(s)
			inWord = true
			i += end + 2
		case plainByte(c):
			w.WriteByte(c)
			inWord = true
			i++
		default:
			return nil, false
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	if len(words) == 0 || words[0] == "" || strings.IndexByte(words[0], '=') >= 0 || shellWords[words[0]] {
		return nil, false
	}
	return words, true
}

// plainByte is a byte bash takes literally outside quotes, whatever
// follows it and wherever it stands in a word.
func plainByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-_./:,+@%=", c) >= 0
}

// shellWords are bash's keywords and builtins (compgen -k, compgen -b of
// bash 5.2) and dash's chdir: a first word bash itself would handle.
var shellWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`if then else elif fi case esac for select while until do done in function
		time { } ! [[ ]] coproc
		. : [ alias bg bind break builtin caller cd chdir command compgen complete compopt continue declare
		dirs disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let
		local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source
		suspend test times trap true type typeset ulimit umask unalias unset wait`) {
		m[w] = true
	}
	return m
}()

// bashEnviron is the environment bash -c gives a program it execs in place
// of itself: env with PWD naming the working directory, SHLVL as it came
// (0 when unset: bash adds one at its start and takes it back at the exec)
// and _ the path the program was run by. It reports false when env holds
// something that changes what bash does before it runs a program: a
// startup file (BASH_ENV, ENV), shell options (SHELLOPTS, BASHOPTS,
// POSIXLY_CORRECT), exported functions (one could stand in for the
// program), a PWD other than cwd (bash would check and canonicalize it) or
// a SHLVL bash would warn about or reset.
func bashEnviron(env []string, cwd, path string) ([]string, bool) {
	out := make([]string, 0, len(env)+3)
	shlvl := "0"
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "BASH_ENV", k == "ENV", k == "SHELLOPTS", k == "BASHOPTS", k == "POSIXLY_CORRECT",
			strings.HasPrefix(k, "BASH_FUNC_"):
			return nil, false
		case k == "PWD":
			if v != cwd {
				return nil, false
			}
		case k == "SHLVL":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 998 || strconv.Itoa(n) != v {
				return nil, false
			}
			shlvl = v
		case k == "_":
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PWD="+cwd, "SHLVL="+shlvl, "_="+path), true
}
