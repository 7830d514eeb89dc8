package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// Horizon in a real browser. checkHorizon drives Debian's chromium in headless mode over the
// DevTools protocol on a pipe (--remote-debugging-pipe: file descriptors 3 and 4, no port, no
// extra Go module): it loads the login page, types the credentials into Horizon's own form,
// submits it like a user, opens the instances page and looks for an instance there. Django's
// CSRF and session cookies are handled by the browser itself, exactly as for a person.

// horizonAptHint is what to install when no chromium is found.
const horizonAptHint = "apt-get install -y chromium (Debian) to check Horizon in a browser"

// horizonTimeout bounds one whole check: browser start, login page, login, instances page.
const horizonTimeout = 3 * time.Minute

// horizonStepTimeout bounds one page load or form submission.
const horizonStepTimeout = 90 * time.Second

// checkHorizon loads baseURL+"/horizon/auth/login/" in headless chromium, saves
// horizon-login.png (and the DOM as horizon-login.html) into artifactDir and checks the login
// form is there; then logs in as user in the browser, opens /horizon/project/instances/, saves
// horizon-instances.png (and .html) and checks wantInstance is a row of the instances table.
// On a failure it saves horizon-failure.png/.html of the page it was on. The browser's
// processes and its temporary profile are gone when it returns, pass or fail. The password is
// never logged.
func checkHorizon(t *testing.T, baseURL, user, password, wantInstance, artifactDir string) {
	t.Helper()
	bin := horizonChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), horizonTimeout)
	defer cancel()
	run, err := runHorizonCheck(ctx, horizonCheck{
		chromium: bin, baseURL: baseURL, user: user, password: password,
		wantInstance: wantInstance, artifactDir: artifactDir,
	})
	t.Logf("horizon: %s", run)
	if err != nil {
		t.Fatalf("checkHorizon(%s, user %s, instance %s) = %v", baseURL, user, wantInstance, err)
	}
}

// horizonChromium finds Debian's chromium (or a chromium-browser) or fails with the apt hint.
func horizonChromium(t testing.TB) string {
	t.Helper()
	p, ok := horizonFindChromium()
	if !ok {
		t.Fatalf("no chromium or chromium-browser on PATH: %s", horizonAptHint)
	}
	return p
}

func horizonFindChromium() (string, bool) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// horizonCheck is one check's input.
type horizonCheck struct {
	chromium     string
	baseURL      string // scheme://host:port, without /horizon
	user         string
	password     string
	domain       string // typed only where the form has an empty domain field; "Default" if empty
	wantInstance string
	artifactDir  string
}

// horizonRun is what one check measured and left behind.
type horizonRun struct {
	browserStart time.Duration // chromium started and a page attached
	loginPage    time.Duration // login page loaded, checked, captured
	login        time.Duration // credentials typed, form submitted, next page loaded
	instances    time.Duration // instances page loaded, checked, captured
	instanceRows []string      // names in the instances table
	artifacts    []string      // files written into artifactDir
	profileDir   string        // chromium's temporary profile (removed by the time the check returns)
	pid          int           // chromium's browser process (and process group)
	stop         time.Duration // browser stopped, processes gone, profile removed
	cleanupErr   error
}

func (r horizonRun) String() string {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("browser start %s, login page %s, login %s, instances page %s (login+instances %s), browser stop %s, rows %q, artifacts %s",
		ms(r.browserStart), ms(r.loginPage), ms(r.login), ms(r.instances), ms(r.login+r.instances), ms(r.stop),
		r.instanceRows, strings.Join(r.artifacts, " "))
}

// runHorizonCheck does checkHorizon's work and returns the first failure. The browser is
// stopped and its profile removed before it returns; a failure to clean up is an error too.
func runHorizonCheck(ctx context.Context, c horizonCheck) (run horizonRun, err error) {
	if c.domain == "" {
		c.domain = "Default"
	}
	base := strings.TrimRight(c.baseURL, "/")
	if err := os.MkdirAll(c.artifactDir, 0o755); err != nil {
		return run, fmt.Errorf("artifact dir: %w", err)
	}
	redact := func(err error) error {
		if err == nil || c.password == "" || !strings.Contains(err.Error(), c.password) {
			return err
		}
		return errors.New(strings.ReplaceAll(err.Error(), c.password, "<password>"))
	}

	t0 := time.Now()
	b, err := startHorizonBrowser(ctx, c.chromium)
	if b != nil {
		run.profileDir, run.pid = b.profile, b.cmd.Process.Pid
		defer func() {
			t0 := time.Now()
			run.cleanupErr = b.close()
			run.stop = time.Since(t0)
			if err == nil && run.cleanupErr != nil {
				err = fmt.Errorf("browser cleanup: %w", run.cleanupErr)
			}
		}()
	}
	if err != nil {
		return run, err
	}
	p, err := b.newPage(ctx)
	if err != nil {
		return run, err
	}
	run.browserStart = time.Since(t0)

	save := func(ctx context.Context, name string) error {
		files, err := p.capture(ctx, c.artifactDir, name, c.password)
		run.artifacts = append(run.artifacts, files...)
		return err
	}
	defer func() {
		if err != nil {
			// Best effort: what the browser showed when the check failed (even on a timeout).
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			_ = save(ctx, "horizon-failure")
			cancel()
			err = redact(err)
		}
	}()

	// 1. The login page, with Horizon's login form.
	t0 = time.Now()
	loginURL := base + "/horizon/auth/login/"
	if err := p.navigate(ctx, loginURL); err != nil {
		return run, err
	}
	if err := p.wantStatus(ctx, loginURL); err != nil {
		return run, err
	}
	var hasForm bool
	if err := p.eval(ctx, `!!(document.querySelector('form #id_username') && document.querySelector('form #id_password'))`, &hasForm); err != nil {
		return run, err
	}
	if !hasForm {
		return run, fmt.Errorf("login page %s: no form with id_username and id_password (title %q)", loginURL, p.title(ctx))
	}
	if err := save(ctx, "horizon-login"); err != nil {
		return run, err
	}
	dom, err := p.dom(ctx)
	if err != nil {
		return run, err
	}
	for _, id := range []string{`id="id_username"`, `id="id_password"`} {
		if !strings.Contains(dom, id) {
			return run, fmt.Errorf("login page DOM has no %s", id)
		}
	}
	run.loginPage = time.Since(t0)

	// 2. Log in through the form, as a person would: type, then press the form's button.
	t0 = time.Now()
	if err := p.typeInto(ctx, "id_username", c.user); err != nil {
		return run, err
	}
	if err := p.typeInto(ctx, "id_password", c.password); err != nil {
		return run, err
	}
	var domainEmpty bool
	if err := p.eval(ctx, `(() => { const d = document.getElementById('id_domain'); return !!d && d.type !== 'hidden' && d.value === '' })()`, &domainEmpty); err != nil {
		return run, err
	}
	if domainEmpty {
		if err := p.typeInto(ctx, "id_domain", c.domain); err != nil {
			return run, err
		}
	}
	if err := p.newDocumentAfter(ctx, `(() => {
		const f = document.getElementById('id_password').form;
		const b = f.querySelector('button[type=submit], input[type=submit]');
		if (b) { b.click() } else { f.requestSubmit() }
		return true })()`); err != nil {
		return run, fmt.Errorf("submitting the login form: %w", err)
	}
	path, err := p.path(ctx)
	if err != nil {
		return run, err
	}
	if strings.HasSuffix(path, "/auth/login/") {
		var msg string
		_ = p.eval(ctx, `Array.from(document.querySelectorAll('.alert, .error, .help-block')).map(e => e.innerText.trim()).filter(Boolean).join(' | ')`, &msg)
		return run, fmt.Errorf("login as %q failed: still on %s, the page says %q", c.user, path, msg)
	}
	run.login = time.Since(t0)

	// 3. The instances page, listing wantInstance.
	t0 = time.Now()
	instancesURL := base + "/horizon/project/instances/"
	if err := p.navigate(ctx, instancesURL); err != nil {
		return run, err
	}
	if path, err = p.path(ctx); err != nil {
		return run, err
	}
	if path != "/horizon/project/instances/" {
		return run, fmt.Errorf("opening %s landed on %s (session not kept?)", instancesURL, path)
	}
	if err := p.wantStatus(ctx, instancesURL); err != nil {
		return run, err
	}
	if err := p.eval(ctx, `Array.from(document.querySelectorAll('table#instances tbody tr[data-display]')).map(r => r.getAttribute('data-display'))`, &run.instanceRows); err != nil {
		return run, err
	}
	if err := save(ctx, "horizon-instances"); err != nil {
		return run, err
	}
	if dom, err = p.dom(ctx); err != nil {
		return run, err
	}
	found := false
	for _, r := range run.instanceRows {
		found = found || r == c.wantInstance
	}
	if !found || !strings.Contains(dom, c.wantInstance) {
		return run, fmt.Errorf("instances page: no row %q in table#instances (rows %q, title %q)", c.wantInstance, run.instanceRows, p.title(ctx))
	}
	run.instances = time.Since(t0)
	return run, nil
}

// horizonBrowser is one headless chromium, driven over --remote-debugging-pipe.
type horizonBrowser struct {
	cmd     *exec.Cmd
	profile string
	stderr  *horizonTail
	cdp     *horizonCDP
	exited  chan struct{}
}

// startHorizonBrowser starts chromium with a fresh profile in its own process group. On an
// error after the start, the returned browser must still be closed.
func startHorizonBrowser(ctx context.Context, bin string) (*horizonBrowser, error) {
	profile, err := os.MkdirTemp("", "osd-horizon-chromium-")
	if err != nil {
		return nil, fmt.Errorf("chromium profile: %w", err)
	}
	// toBrowser: we write, chromium reads on fd 3; fromBrowser: chromium writes on fd 4.
	toBrowserR, toBrowserW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(profile)
		return nil, err
	}
	fromBrowserR, fromBrowserW, err := os.Pipe()
	if err != nil {
		toBrowserR.Close()
		toBrowserW.Close()
		os.RemoveAll(profile)
		return nil, err
	}
	cmd := exec.Command(bin,
		"--headless=new", "--no-sandbox", "--disable-gpu",
		"--remote-debugging-pipe",
		"--user-data-dir="+profile,
		"--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-breakpad", "--disable-crash-reporter",
		"--password-store=basic", "--no-proxy-server", "--hide-scrollbars", "--mute-audio",
		"--window-size=1366,900",
		"about:blank")
	// Everything chromium writes stays inside the profile directory.
	cmd.Env = append(os.Environ(), "HOME="+profile, "XDG_CONFIG_HOME="+filepath.Join(profile, "config"),
		"XDG_CACHE_HOME="+filepath.Join(profile, "cache"))
	cmd.ExtraFiles = []*os.File{toBrowserR, fromBrowserW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	tailBuf := &horizonTail{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = tailBuf, tailBuf
	// Helpers in other sessions (crashpad) hold the output pipe open: do not let cmd.Wait wait
	// for them once the browser itself has exited.
	cmd.WaitDelay = 500 * time.Millisecond
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{toBrowserR, toBrowserW, fromBrowserR, fromBrowserW} {
			f.Close()
		}
		os.RemoveAll(profile)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	toBrowserR.Close()
	fromBrowserW.Close()
	b := &horizonBrowser{cmd: cmd, profile: profile, stderr: tailBuf, exited: make(chan struct{})}
	b.cdp = newHorizonCDP(toBrowserW, fromBrowserR)
	go func() { cmd.Wait(); close(b.exited) }()
	var v struct {
		Product string `json:"product"`
	}
	if err := b.cdp.call(ctx, "", "Browser.getVersion", nil, &v); err != nil {
		return b, fmt.Errorf("chromium did not answer on its DevTools pipe: %w (output: %s)", err, b.stderr)
	}
	return b, nil
}

// newPage opens a tab and attaches to it (flattened session).
func (b *horizonBrowser) newPage(ctx context.Context) (*horizonPage, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.cdp.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.cdp.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	p := &horizonPage{cdp: b.cdp, session: att.SessionID}
	if err := p.cdp.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 1366, "height": 900, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// close kills chromium's whole process group, then anything else still using the profile,
// waits until none is left and removes the profile.
func (b *horizonBrowser) close() error {
	pgid := b.cmd.Process.Pid
	// Ask chromium to quit so it reaps its own children; then kill whatever is left.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	if b.cdp.call(ctx, "", "Browser.close", nil, nil) == nil {
		select {
		case <-b.exited:
		case <-ctx.Done():
		}
	}
	cancel()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	b.cdp.shutdown()
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
	}
	var left []int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = horizonBrowserProcesses(pgid, b.profile)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	var errs []error
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("chromium processes %v still alive", left))
	}
	if err := os.RemoveAll(b.profile); err != nil {
		errs = append(errs, fmt.Errorf("remove chromium profile: %w", err))
	}
	return errors.Join(errs...)
}

// horizonBrowserProcesses lists live (non-zombie) processes in process group pgid or whose
// command line mentions profile.
func horizonBrowserProcesses(pgid int, profile string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if f[2] == strconv.Itoa(pgid) || bytes.Contains(cmdline, []byte(profile)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// horizonPage is one attached tab.
type horizonPage struct {
	cdp     *horizonCDP
	session string
}

// eval runs a JavaScript expression in the page and decodes its value into out (if not nil).
func (p *horizonPage) eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.cdp.call(ctx, p.session, "Runtime.evaluate",
		map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("javascript: %s %s", e.Text, e.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// newDocumentAfter marks the current document, runs action and waits until another document
// has replaced it and finished loading.
func (p *horizonPage) newDocumentAfter(ctx context.Context, action string) error {
	if err := p.eval(ctx, `window.__osdOldDocument = true`, nil); err != nil {
		return err
	}
	if err := p.eval(ctx, action, nil); err != nil {
		return err
	}
	return p.waitFor(ctx, `!window.__osdOldDocument && document.readyState === 'complete'`)
}

// navigate loads url and waits until the (possibly redirected) page has loaded.
func (p *horizonPage) navigate(ctx context.Context, url string) error {
	if err := p.eval(ctx, `window.__osdOldDocument = true`, nil); err != nil {
		return err
	}
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.cdp.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return fmt.Errorf("navigate to %s: %w", url, err)
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, r.ErrorText)
	}
	if err := p.waitFor(ctx, `!window.__osdOldDocument && document.readyState === 'complete'`); err != nil {
		return fmt.Errorf("loading %s: %w", url, err)
	}
	return nil
}

// waitFor polls a boolean expression until it is true. Errors while a navigation replaces the
// document are expected and retried; the last one is reported when ctx ends.
func (p *horizonPage) waitFor(ctx context.Context, expr string) error {
	ctx, cancel := context.WithTimeout(ctx, horizonStepTimeout)
	defer cancel()
	var last error
	for {
		var ok bool
		err := p.eval(ctx, expr, &ok)
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", expr, ctx.Err(), last)
		case <-p.cdp.closed:
			return fmt.Errorf("waiting for %s: %w", expr, p.cdp.err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// wantStatus checks the page's main document came with HTTP 200.
func (p *horizonPage) wantStatus(ctx context.Context, url string) error {
	var status int
	if err := p.eval(ctx, `(performance.getEntriesByType('navigation')[0] || {}).responseStatus || 0`, &status); err != nil {
		return err
	}
	if status != 200 {
		return fmt.Errorf("GET %s: HTTP status %d, want 200 (title %q)", url, status, p.title(ctx))
	}
	return nil
}

// typeInto focuses the input with id, clears it and types text as keyboard input.
func (p *horizonPage) typeInto(ctx context.Context, id, text string) error {
	var ok bool
	expr := fmt.Sprintf(`(() => { const e = document.getElementById(%q); if (!e) return false; e.focus(); e.value = ''; return document.activeElement === e })()`, id)
	if err := p.eval(ctx, expr, &ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no focusable input #%s", id)
	}
	if err := p.cdp.call(ctx, p.session, "Input.insertText", map[string]any{"text": text}, nil); err != nil {
		return fmt.Errorf("typing into #%s: %w", id, err)
	}
	return nil
}

func (p *horizonPage) path(ctx context.Context) (string, error) {
	var s string
	err := p.eval(ctx, `location.pathname`, &s)
	return s, err
}

func (p *horizonPage) title(ctx context.Context) string {
	var s string
	_ = p.eval(ctx, `document.title`, &s)
	return s
}

func (p *horizonPage) dom(ctx context.Context) (string, error) {
	var s string
	err := p.eval(ctx, `document.documentElement.outerHTML`, &s)
	return s, err
}

// capture writes name.png (the viewport) and name.html (the live DOM, secret removed) into dir.
func (p *horizonPage) capture(ctx context.Context, dir, name, secret string) ([]string, error) {
	var shot struct {
		Data string `json:"data"`
	}
	if err := p.cdp.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return nil, fmt.Errorf("screenshot %s: %w", name, err)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return nil, fmt.Errorf("screenshot %s: %w", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		return nil, fmt.Errorf("screenshot %s is not a PNG", name)
	}
	dom, err := p.dom(ctx)
	if err != nil {
		return nil, err
	}
	if secret != "" {
		dom = strings.ReplaceAll(dom, secret, "<password>")
	}
	var files []string
	for file, data := range map[string][]byte{name + ".png": png, name + ".html": []byte(dom)} {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// horizonCDP is a minimal Chrome DevTools protocol client over the pipe transport: JSON
// messages separated by NUL bytes; answers matched to calls by id; events ignored.
type horizonCDP struct {
	w       io.WriteCloser
	r       io.ReadCloser
	mu      sync.Mutex
	next    int64
	pending map[int64]chan horizonCDPMessage
	closed  chan struct{}
	once    sync.Once
	readErr error
}

type horizonCDPMessage struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func newHorizonCDP(w io.WriteCloser, r io.ReadCloser) *horizonCDP {
	c := &horizonCDP{w: w, r: r, pending: map[int64]chan horizonCDPMessage{}, closed: make(chan struct{})}
	go c.read()
	return c
}

func (c *horizonCDP) read() {
	br := bufio.NewReaderSize(c.r, 1<<20)
	for {
		b, err := br.ReadBytes(0)
		if err != nil {
			c.fail(fmt.Errorf("devtools pipe: %w", err))
			return
		}
		var m horizonCDPMessage
		if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
			c.fail(fmt.Errorf("devtools message: %w", err))
			return
		}
		if m.ID == 0 {
			continue // an event
		}
		c.mu.Lock()
		ch := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

func (c *horizonCDP) fail(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.readErr = err
		c.mu.Unlock()
		close(c.closed)
	})
}

func (c *horizonCDP) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

// shutdown closes both ends of the pipe.
func (c *horizonCDP) shutdown() {
	c.w.Close()
	c.r.Close()
	c.fail(errors.New("devtools pipe closed"))
}

// call sends method with params to the browser (session "") or a page session and decodes
// the answer's result into out (if not nil).
func (c *horizonCDP) call(ctx context.Context, session, method string, params, out any) error {
	ch := make(chan horizonCDPMessage, 1)
	c.mu.Lock()
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if params == nil {
		params = struct{}{}
	}
	b, err := json.Marshal(horizonCDPMessage{ID: id, Method: method, Params: params, SessionID: session})
	if err != nil {
		return err
	}
	c.mu.Lock()
	_, err = c.w.Write(append(b, 0))
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s (code %d)", method, m.Error.Message, m.Error.Code)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, out); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		return nil
	case <-c.closed:
		return fmt.Errorf("%s: %w", method, c.err())
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// horizonTail keeps the last max bytes written to it (chromium's output, for errors).
type horizonTail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *horizonTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *horizonTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// fakeHorizon is a loopback stand-in for Horizon's login flow, used only to show the check
// itself fails where it must without a cloud (TestHorizonOnDevCloud runs it against the real
// Horizon): a login form with a CSRF token bound to a cookie, a session cookie on success, and
// an instances table for logged-in sessions only.
type fakeHorizon struct {
	password string
	rows     []string
	noForm   bool // the login page has no login form
	status   int  // the login page's HTTP status (0: 200)
}

func (f fakeHorizon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const csrf, session = "csrf-0123456789", "session-0123456789"
	loginPage := func(msg string) {
		http.SetCookie(w, &http.Cookie{Name: "csrftoken", Value: csrf, Path: "/"})
		if f.status != 0 {
			w.WriteHeader(f.status)
		}
		fmt.Fprint(w, `<html><head><title>Login - OpenStack Dashboard</title></head><body>`)
		if f.noForm {
			fmt.Fprint(w, `<p>It works!</p></body></html>`)
			return
		}
		fmt.Fprintf(w, `<form method="POST" action="/horizon/auth/login/"><div class="alert">%s</div>
			<input type="hidden" name="csrfmiddlewaretoken" value="%s">
			<input type="text" name="username" id="id_username"><input type="password" name="password" id="id_password">
			<button type="submit" id="loginBtn">Sign In</button></form></body></html>`, html.EscapeString(msg), csrf)
	}
	loggedIn := func() bool {
		c, err := r.Cookie("sessionid")
		return err == nil && c.Value == session
	}
	switch {
	case r.URL.Path == "/horizon/auth/login/" && r.Method == http.MethodGet:
		loginPage("")
	case r.URL.Path == "/horizon/auth/login/" && r.Method == http.MethodPost:
		c, err := r.Cookie("csrftoken")
		if err != nil || c.Value != r.PostFormValue("csrfmiddlewaretoken") {
			http.Error(w, "CSRF verification failed", http.StatusForbidden)
			return
		}
		if r.PostFormValue("username") != "admin" || r.PostFormValue("password") != f.password {
			loginPage("Invalid credentials.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "sessionid", Value: session, Path: "/"})
		http.Redirect(w, r, "/horizon/project/", http.StatusFound)
	case !loggedIn():
		http.Redirect(w, r, "/horizon/auth/login/?next="+r.URL.Path, http.StatusFound)
	case r.URL.Path == "/horizon/project/":
		fmt.Fprint(w, `<html><head><title>Overview</title></head><body>Overview</body></html>`)
	case r.URL.Path == "/horizon/project/instances/":
		fmt.Fprint(w, `<html><head><title>Instances</title></head><body><table id="instances"><tbody>`)
		for _, n := range f.rows {
			fmt.Fprintf(w, `<tr data-display="%s"><td>%s</td></tr>`, html.EscapeString(n), html.EscapeString(n))
		}
		fmt.Fprint(w, `</tbody></table></body></html>`)
	default:
		http.NotFound(w, r)
	}
}

// horizonSecret is a random password for tests.
func horizonSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// requireHorizonCleanedUp fails when the run left a chromium process or its profile behind.
func requireHorizonCleanedUp(t *testing.T, run horizonRun) {
	t.Helper()
	if run.pid == 0 || run.profileDir == "" {
		t.Fatalf("run recorded no browser (pid %d, profile %q)", run.pid, run.profileDir)
	}
	if run.cleanupErr != nil {
		t.Errorf("cleanup: %v", run.cleanupErr)
	}
	if left := horizonBrowserProcesses(run.pid, run.profileDir); len(left) > 0 {
		t.Errorf("chromium processes %v left behind", left)
	}
	if _, err := os.Stat(run.profileDir); !os.IsNotExist(err) {
		t.Errorf("chromium profile %s left behind (stat: %v)", run.profileDir, err)
	}
}

func TestHorizonCheckFailsWhereItMust(t *testing.T) {
	if testing.Short() {
		t.Skip("starts headless Chromium; skipped in -short")
	}
	if _, ok := horizonFindChromium(); !ok {
		t.Fatalf("no chromium or chromium-browser on PATH: %s", horizonAptHint)
	}
	password := horizonSecret(t)
	for _, tc := range []struct {
		name     string
		fake     fakeHorizon
		password string
		want     string
		wantErr  string // "" means the check passes
	}{
		{"logs in and finds the instance", fakeHorizon{password: password, rows: []string{"other", "vm1"}}, password, "vm1", ""},
		{"wrong password", fakeHorizon{password: password, rows: []string{"vm1"}}, password + "x", "vm1", `login as "admin" failed`},
		{"instance missing", fakeHorizon{password: password, rows: []string{"other"}}, password, "vm1", `no row "vm1"`},
		{"no login form", fakeHorizon{password: password, noForm: true}, password, "vm1", "no form with id_username and id_password"},
		{"login page is an error", fakeHorizon{password: password, status: http.StatusInternalServerError}, password, "vm1", "HTTP status 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.fake)
			defer srv.Close()
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), horizonTimeout)
			defer cancel()
			run, err := runHorizonCheck(ctx, horizonCheck{chromium: horizonChromium(t), baseURL: srv.URL,
				user: "admin", password: tc.password, wantInstance: tc.want, artifactDir: dir})
			t.Logf("%s", run)
			requireHorizonCleanedUp(t, run)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("runHorizonCheck = %v, want nil", err)
				}
				for _, f := range []string{"horizon-login.png", "horizon-login.html", "horizon-instances.png", "horizon-instances.html"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
						t.Errorf("artifact %s: %v", f, err)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("runHorizonCheck = %v, want an error containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("runHorizonCheck's error holds the password")
			}
			if _, err := os.Stat(filepath.Join(dir, "horizon-failure.png")); err != nil {
				t.Errorf("failure screenshot: %v", err)
			}
		})
	}
}

// TestHorizonOnDevCloud runs the check against a running cloud on this host (the lead's dev
// cloud): OSD_DEV_CLOUD=1, credentials from /var/lib/osd/clouds.yaml (cloud osd), Horizon at
// OSD_HORIZON_URL (default http://127.0.0.1:30080). It looks for OSD_HORIZON_INSTANCE, or
// creates a server of its own for that and deletes it. Screenshots go to OSD_ARTIFACTS (default:
// a temporary directory). It stays opt-in because it needs a cloud already running here;
// TestOpenStackE2E runs the same check on the cloud it deploys.
func TestHorizonOnDevCloud(t *testing.T) {
	if os.Getenv("OSD_DEV_CLOUD") != "1" {
		t.Skip("set OSD_DEV_CLOUD=1 to check the Horizon of the cloud running on this host")
	}
	const clouds = "/var/lib/osd/clouds.yaml"
	user, password, domain := horizonCloudsCredentials(t, clouds, "osd")
	baseURL := os.Getenv("OSD_HORIZON_URL")
	if baseURL == "" {
		baseURL = "http://127.0.0.1:30080"
	}
	artifacts := os.Getenv("OSD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	instance := os.Getenv("OSD_HORIZON_INSTANCE")
	if instance == "" {
		instance = "osd-horizon-check-" + horizonSecret(t)[:8]
		openstack := func(args ...string) (string, error) {
			cmd := exec.Command("openstack", args...)
			cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+clouds, "OS_CLOUD=osd")
			out, err := cmd.CombinedOutput()
			return strings.TrimSpace(string(out)), err
		}
		// Horizon lists a server in any state: no need to wait for ACTIVE.
		id, err := openstack("server", "create", "--flavor", "m1.tiny", "--image", "osd-test", "--network", "osd-net",
			"-f", "value", "-c", "id", instance)
		if err != nil {
			t.Fatalf("openstack server create %s: %v\n%s", instance, err, id)
		}
		t.Cleanup(func() {
			if out, err := openstack("server", "delete", "--wait", id); err != nil {
				t.Errorf("openstack server delete %s: %v\n%s", id, err, out)
			}
		})
	}
	chromium := horizonChromium(t)

	t.Run("admin logs in and sees the instance", func(t *testing.T) {
		checkHorizon(t, baseURL, user, password, instance, artifacts)
		for _, f := range []string{"horizon-login.png", "horizon-instances.png"} {
			if _, err := os.Stat(filepath.Join(artifacts, f)); err != nil {
				t.Errorf("screenshot %s: %v", f, err)
			}
		}
		t.Logf("screenshots in %s", artifacts)
	})

	for _, tc := range []struct {
		name, password, instance, wantErr string
	}{
		{"a wrong password fails", password + "-wrong", instance, fmt.Sprintf("login as %q failed", user)},
		{"an instance that does not exist fails", password, instance + "-absent", fmt.Sprintf("no row %q", instance+"-absent")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), horizonTimeout)
			defer cancel()
			run, err := runHorizonCheck(ctx, horizonCheck{chromium: chromium, baseURL: baseURL, user: user,
				password: tc.password, domain: domain, wantInstance: tc.instance, artifactDir: t.TempDir()})
			t.Logf("%s", run)
			requireHorizonCleanedUp(t, run)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("runHorizonCheck = %v, want an error containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), password) {
				t.Fatal("runHorizonCheck's error holds the password")
			}
			t.Logf("failed as it must: %v", err)
		})
	}
}

// horizonCloudsCredentials reads a cloud's username, password and user domain from a clouds.yaml.
func horizonCloudsCredentials(t testing.TB, path, cloud string) (user, password, domain string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Clouds map[string]struct {
			Auth struct {
				Username       string `json:"username"`
				Password       string `json:"password"`
				UserDomainName string `json:"user_domain_name"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	a := f.Clouds[cloud].Auth
	if a.Username == "" || a.Password == "" {
		t.Fatalf("%s: cloud %s has no username or password", path, cloud)
	}
	return a.Username, a.Password, a.UserDomainName
}
