package integration

// The web playground in a real browser: Debian's Chromium, driven with
// chromedp. A screenshot is kept as a test artifact.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
		t.Fatal("no Chromium (apt-get install -y chromium)")
	}
	t.Skip("no Chromium")
	return ""
}

func TestPlaygroundInBrowser(t *testing.T) {
	browser := chromium(t)
	requirePythonData(t)
	s := startServe(t, "--token", "pg-token")
	base := strings.TrimSuffix(s.url, "/mcp")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	code := "import matplotlib.pyplot as plt\nprint('hello from the browser test')\nplt.plot([1, 3, 2, 4])\nplt.savefig('browser-chart.png')\n"
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser, %s: %v", what, err)
		}
	}
	poll := func(what, expr string, d time.Duration) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d)))
		must(what, err)
	}
	must("navigate", chromedp.Do(ctx, chromedp.Navigate(base+"/")))
	must("page", chromedp.Do(ctx, chromedp.WaitVisible("#run")))
	must("api key", chromedp.Do(ctx, chromedp.SetValue("#apikey", "pg-token")))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('apikey').dispatchEvent(new Event('change')); location.reload(); true`))
	must("reload", err)
	time.Sleep(500 * time.Millisecond)
	must("page after reload", chromedp.Do(ctx, chromedp.WaitVisible("#run")))
	poll("runtimes listed", `document.getElementById('status').textContent === 'ready'`, 30*time.Second)
	js := "`" + code + "`"
	editorKind, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){ const cm = document.querySelector('.CodeMirror'); if (cm) { cm.CodeMirror.setValue(`+js+`); return 'codemirror'; } document.getElementById('code').value = `+js+`; return 'textarea'; })()`))
	must("set code", err)
	must("click run", chromedp.Do(ctx, chromedp.Click("#run")))
	poll("run finished", `['done','failed','error'].includes(document.getElementById('status').textContent)`, 60*time.Second)
	status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('status').textContent`))
	must("status", err)
	output, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('output').textContent`))
	must("output", err)
	poll("image shown", `(document.querySelector('#images img') || {}).naturalWidth > 0`, 20*time.Second)
	imgWidth, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector('#images img').naturalWidth`))
	must("image", err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must("screenshot", err)
	if status != "done" || !strings.Contains(output, "hello from the browser test") || imgWidth < 100 {
		t.Fatalf("status %q, output %q, image width %d", status, output, imgWidth)
	}
	if editorKind != "codemirror" && os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
		t.Errorf("the code editor component did not load (%s): make assets", editorKind)
	}
	dir := os.Getenv("SRT_MCP_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	out := filepath.Join(dir, "playground-"+strings.ReplaceAll(t.Name(), "/", "_")+".png")
	if err := os.WriteFile(out, shot, 0o644); err == nil {
		t.Logf("screenshot: %s (%d bytes)", out, len(shot))
	}
	// Usable on a phone: nothing wider than the screen.
	must("phone viewport", chromedp.Do(ctx, chromedp.EmulateViewport(375, 740)))
	scroll, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	must("width", err)
	if scroll > 380 {
		t.Errorf("at 375 px the page is %d px wide", scroll)
	}
}
