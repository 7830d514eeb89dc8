package charts

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A secret on a command line is in /proc/PID/cmdline, which every local user (and every
// process of the host) can read while the command runs. A secret may reach a program
// through its environment, a file or its standard input; never through its arguments.
// These tests find, in every rendered container, probe and script, each place where the
// value of a Secret-backed variable becomes an argument of a program that is executed:
// Kubernetes' $(NAME) expansion in command and args, and the shell's expansion of
// "$NAME" in the arguments of anything but a shell builtin.

// shellBuiltins run inside the shell: their arguments are in no process's command line.
// (exec, command and env are not here: they run a program with the arguments.)
var shellBuiltins = map[string]bool{
	"printf": true, "echo": true, "export": true, "local": true, "readonly": true, "test": true, "[": true,
	"unset": true, ":": true, "read": true, "set": true, "trap": true, "cd": true, "exit": true, "return": true,
	"shift": true, "true": true, "false": true, "wait": true, "umask": true,
}

// nonSecretIdentifiers are values osd keeps in Secrets that are identifiers, not
// credentials, and that programs are given as arguments by design: the libvirt secret's
// UUID (it names the secret; libvirt never hands out the value) and the Ceph cluster's
// fsid (in every Ceph client's ceph.conf and in `ceph status`).
var nonSecretIdentifiers = map[string]string{
	"ceph-client-cinder/libvirt-uuid": "the libvirt secret's UUID",
	"ceph-cluster/fsid":               "the Ceph cluster's fsid",
}

// argvLeak is one place where a secret reaches a program's arguments.
type argvLeak struct {
	variable, command string
}

func (l argvLeak) String() string {
	return fmt.Sprintf("$%s in the arguments of %q", l.variable, l.command)
}

// shellWord is a word of a simple command: its text as written and the variables it expands.
type shellWord struct {
	text string
	refs []string
}

// shellScan finds argvLeaks in a POSIX shell script: a small lexer that knows quoting,
// comments, here-documents (their bodies are standard input), command substitutions
// (scanned as scripts of their own), assignments (which pass taint on) and the builtins.
type shellScan struct {
	src     string
	pos     int
	tainted map[string]bool
	leaks   []argvLeak
	heredoc []string // terminators of the here-documents opened on this line
}

var assignRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)

func scanShell(script string, tainted map[string]bool) []argvLeak {
	s := &shellScan{src: script, tainted: map[string]bool{}}
	for k, v := range tainted {
		s.tainted[k] = v
	}
	s.script(0)
	return s.leaks
}

// script scans commands until the end or an unmatched closing parenthesis (depth > 0).
func (s *shellScan) script(depth int) {
	for s.pos < len(s.src) {
		words, end := s.command(depth)
		s.check(words)
		if end == ')' && depth > 0 {
			return
		}
	}
}

// command reads one simple command's words up to a separator and returns the separator.
func (s *shellScan) command(depth int) ([]shellWord, byte) {
	var words []shellWord
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == ' ' || c == '\t':
			s.pos++
		case c == '\\' && s.pos+1 < len(s.src) && s.src[s.pos+1] == '\n':
			s.pos += 2
		case c == '\n':
			s.pos++
			s.skipHeredocs()
			return words, c
		case c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			s.pos++
			if c == ')' && depth > 0 {
				return words, c
			}
			if c == '(' {
				s.script(depth + 1) // a subshell: its commands are commands
			}
			return words, c
		case c == '#' && (s.pos == 0 || strings.ContainsRune(" \t\n;&|(", rune(s.src[s.pos-1]))):
			for s.pos < len(s.src) && s.src[s.pos] != '\n' {
				s.pos++
			}
		case c == '<' || c == '>' || (c >= '0' && c <= '9' && s.pos+1 < len(s.src) && (s.src[s.pos+1] == '>' || s.src[s.pos+1] == '<')):
			s.redirect()
		default:
			w := s.word(depth)
			words = append(words, w)
		}
	}
	return words, 0
}

// redirect skips a redirection and its target; a here-document's terminator is noted.
func (s *shellScan) redirect() {
	for s.pos < len(s.src) && s.src[s.pos] >= '0' && s.src[s.pos] <= '9' {
		s.pos++
	}
	op := ""
	for s.pos < len(s.src) && strings.ContainsRune("<>&-", rune(s.src[s.pos])) && len(op) < 3 {
		op += string(s.src[s.pos])
		s.pos++
	}
	for s.pos < len(s.src) && (s.src[s.pos] == ' ' || s.src[s.pos] == '\t') {
		s.pos++
	}
	if strings.HasPrefix(op, "&") || strings.HasSuffix(op, "&") {
		if s.pos < len(s.src) && (s.src[s.pos] == '-' || (s.src[s.pos] >= '0' && s.src[s.pos] <= '9')) {
			s.pos++
			return
		}
	}
	target := s.word(0)
	if op == "<<" || op == "<<-" {
		s.heredoc = append(s.heredoc, strings.Trim(target.text, `'"\`))
	}
}

// skipHeredocs skips the bodies of the here-documents opened on the line just ended.
func (s *shellScan) skipHeredocs() {
	for _, term := range s.heredoc {
		for s.pos < len(s.src) {
			end := strings.IndexByte(s.src[s.pos:], '\n')
			line := s.src[s.pos:]
			if end >= 0 {
				line = s.src[s.pos : s.pos+end]
				s.pos += end + 1
			} else {
				s.pos = len(s.src)
			}
			if strings.TrimLeft(line, "\t") == term {
				break
			}
		}
	}
	s.heredoc = nil
}

// word reads one word with its quoting and records the variables it expands.
func (s *shellScan) word(depth int) shellWord {
	var w shellWord
	start := s.pos
	inDouble := false
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		if !inDouble && strings.ContainsRune(" \t\n;&|()<>", rune(c)) {
			break
		}
		switch {
		case c == '\\':
			s.pos += 2
		case c == '\'' && !inDouble:
			end := strings.IndexByte(s.src[s.pos+1:], '\'')
			if end < 0 {
				s.pos = len(s.src)
			} else {
				s.pos += end + 2
			}
		case c == '"':
			inDouble = !inDouble
			s.pos++
		case c == '`':
			end := strings.IndexByte(s.src[s.pos+1:], '`')
			if end < 0 {
				end = len(s.src) - s.pos - 1
			}
			inner := s.src[s.pos+1 : s.pos+1+end]
			s.leaks = append(s.leaks, scanShell(inner, s.tainted)...)
			s.pos += end + 2
		case c == '$':
			s.dollar(&w)
		default:
			s.pos++
		}
	}
	if s.pos > len(s.src) {
		s.pos = len(s.src)
	}
	w.text = s.src[start:s.pos]
	return w
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// dollar reads an expansion at s.pos: $NAME, ${NAME...}, $((...)), $(...).
func (s *shellScan) dollar(w *shellWord) {
	s.pos++
	rest := s.src[s.pos:]
	switch {
	case strings.HasPrefix(rest, "(("):
		end := strings.Index(rest, "))")
		if end < 0 {
			end = len(rest) - 2
		}
		for _, n := range nameRE.FindAllString(rest[2:end], -1) {
			w.refs = append(w.refs, n)
		}
		s.pos += end + 2
	case strings.HasPrefix(rest, "("):
		s.pos++
		sub := &shellScan{src: s.src, pos: s.pos, tainted: s.tainted}
		sub.script(1)
		s.leaks = append(s.leaks, sub.leaks...)
		s.pos = sub.pos
	case strings.HasPrefix(rest, "{"):
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			end = len(rest) - 1
		}
		if n := nameRE.FindString(strings.TrimPrefix(rest[1:end], "#")); n != "" {
			w.refs = append(w.refs, n)
		}
		s.pos += end + 1
	default:
		if n := nameRE.FindString(rest); n != "" {
			w.refs = append(w.refs, n)
			s.pos += len(n)
		}
	}
}

// check records a simple command's leaks and the taint its assignments pass on.
func (s *shellScan) check(words []shellWord) {
	i := 0
	for ; i < len(words); i++ {
		m := assignRE.FindStringSubmatch(words[i].text)
		if m == nil {
			break
		}
		if s.anyTainted(words[i].refs) {
			s.tainted[m[1]] = true
		}
	}
	if i == len(words) {
		return
	}
	name := strings.Trim(words[i].text, `'"`)
	switch name {
	case "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}":
		s.check(words[i+1:]) // a keyword: the command follows it
		return
	case "for", "case", "esac", "in":
		return
	}
	if shellBuiltins[name] {
		if name == "export" || name == "local" || name == "readonly" {
			for _, w := range words[i+1:] {
				if m := assignRE.FindStringSubmatch(w.text); m != nil && s.anyTainted(w.refs) {
					s.tainted[m[1]] = true
				}
			}
		}
		return
	}
	for _, w := range words[i:] {
		for _, r := range w.refs {
			if s.tainted[r] {
				s.leaks = append(s.leaks, argvLeak{variable: r, command: strings.TrimSpace(joinWords(words[i:]))})
			}
		}
	}
}

func (s *shellScan) anyTainted(refs []string) bool {
	for _, r := range refs {
		if s.tainted[r] {
			return true
		}
	}
	return false
}

func joinWords(ws []shellWord) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.text)
	}
	if b.Len() > 160 {
		return b.String()[:160] + "..."
	}
	return b.String()
}

// shellScript returns the script of a command that runs one (sh/bash [-flags] -c SCRIPT).
func shellScript(argv []string) (string, bool) {
	if len(argv) < 3 {
		return "", false
	}
	switch strings.TrimPrefix(strings.TrimPrefix(argv[0], "/usr"), "/bin/") {
	case "sh", "bash", "dash":
	default:
		return "", false
	}
	for i := 1; i < len(argv)-1; i++ {
		if strings.HasPrefix(argv[i], "-") && strings.Contains(argv[i], "c") {
			return argv[i+1], true
		}
	}
	return "", false
}

// containerLeaks finds every argvLeak of a container: in its command and args, and in its
// probes' exec commands.
func containerLeaks(c corev1.Container) []argvLeak {
	secretVars := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			if _, ok := nonSecretIdentifiers[ref]; !ok {
				secretVars[e.Name] = true
			}
		}
	}
	var leaks []argvLeak
	commands := [][]string{append(append([]string{}, c.Command...), c.Args...)}
	for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		if p != nil && p.Exec != nil {
			commands = append(commands, p.Exec.Command)
		}
	}
	for _, argv := range commands {
		for _, a := range argv {
			for name := range secretVars {
				if strings.Contains(a, "$("+name+")") {
					leaks = append(leaks, argvLeak{variable: name, command: "Kubernetes' $(" + name + ") in " + argv[0]})
				}
			}
		}
		if script, ok := shellScript(argv); ok {
			leaks = append(leaks, scanShell(script, secretVars)...)
		}
	}
	return leaks
}

// TestShellScan checks the scanner on the cases that matter, old templates' lines included.
func TestShellScan(t *testing.T) {
	tainted := map[string]bool{"PW": true, "ROOT_PASSWORD": true}
	tests := []struct {
		name, script string
		want         []string // leaked variables, in order
	}{
		{"sed expression with a secret", `sed -e "s|@@PW@@|${PW}|g" "$f" > out`, []string{"PW"}},
		{"rabbitmqctl add_user", `rabbitmqctl -q add_user "$U" "$PW" 2>/dev/null || rabbitmqctl -q change_password "$U" "$PW"`, []string{"PW", "PW"}},
		{"mysql -p", `exec mariadb-dump -h127.0.0.1 -uroot -p"$ROOT_PASSWORD" --all-databases`, []string{"ROOT_PASSWORD"}},
		{"taint through an assignment", "x=\"a${PW}b\"\ncurl -u \"u:$x\" http://h/", []string{"x"}},
		{"taint through export", "export MYSQL_PWD=\"$ROOT_PASSWORD\"\nmysql -p\"$MYSQL_PWD\"", []string{"MYSQL_PWD"}},
		{"command substitution", `echo "$(sh -c "tool $PW")"`, []string{"PW"}},
		{"subshell", "(\n  i=0\n  tool --key=$PW\n) &", []string{"PW"}},
		{"after a keyword", "if true; then tool $PW; fi", []string{"PW"}},
		{"printf to a file", `printf 's|@@PW@@|%s|g\n' PW "${PW}" >> "$script"`, nil},
		{"printf to a pipe", `printf '%s\n' "$PW" | rabbitmqctl -q add_user nova`, nil},
		{"environment", `MYSQL_PWD="$ROOT_PASSWORD" exec mariadb -uroot`, nil},
		{"export then use", "export MYSQL_PWD=\"$ROOT_PASSWORD\"\nmysqladmin --user=root ping", nil},
		{"here-document", "mysql --user=root <<SQL\nALTER USER 'x'@'%' IDENTIFIED BY '$PW';\nSQL\necho done", nil},
		{"single quotes", `python3 -c 'import os; print(os.environ["PW"])' '$PW'`, nil},
		{"comment", "# tool $PW\ntrue", nil},
		{"unset", "unset PW", nil},
		{"test", `[ -n "$PW" ] || exit 1`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range scanShell(tt.script, tainted) {
				got = append(got, l.variable)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("scanShell(%q) leaks %v, want %v", tt.script, got, tt.want)
			}
		})
	}
}

// TestNoSecretOnCommandLine renders every chart of the catalog (storage on: Ceph's and
// Cinder's templates too, and Cinder with LVM) and checks that no container, init step or
// probe puts a Secret's value in a program's arguments.
func TestNoSecretOnCommandLine(t *testing.T) {
	scripts := 0
	for _, tc := range hardeningCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := renderWorkloads(t, tc.chart, tc.spec)
			for pname, pod := range r.pods {
				for _, c := range podContainers(pod) {
					if _, ok := shellScript(c.Command); ok {
						scripts++
					}
					for _, l := range containerLeaks(c) {
						t.Errorf("%s %s: %s", pname, c.Name, l)
					}
				}
			}
		})
	}
	if scripts < 20 {
		t.Errorf("scanned %d shell scripts, want the charts' scripts (at least 20)", scripts)
	}
}
