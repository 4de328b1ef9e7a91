package uitest_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// chromium returns the path of Debian's Chromium. Without it the test
// cannot run: under CI it fails, elsewhere it skips, saying how to
// install it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; CI needs it: apt-get install -y chromium")
	}
	t.Skip("SKIPPED: chromium is not installed, so the page is not tested in a browser; run: apt-get install -y chromium")
	return ""
}

// buildTurnframe builds the turnframe command from this checkout.
func buildTurnframe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "turnframe")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/turnframe")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build turnframe: %v\n%s", err, out)
	}
	return bin
}

// unknownRow writes a turnframe file holding one outbox row whose outcome
// is unknown, with the library: a turn enqueues it, a dispatcher claims it
// and dies, and the claim's lease ends (ExpireClaims).
func unknownRow(t *testing.T, path string) turnframe.OutboxID {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, path)
	is.NoErr(err) // create the file
	defer store.Close()
	rt := turnframe.New(store)
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "charge me 5 euros")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{
		{Key: "charge-1", Case: "order/1", Name: "charge", Payload: []byte(`{"cents":500}`)},
	}})
	is.NoErr(err)
	rep, err := rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charge.requested", Data: call.Command.Payload}},
			turnframe.OutboxMessage{Destination: "payments", Payload: call.Command.Payload})
	}))
	is.NoErr(err)
	is.NoErr(rt.Deliver(ctx, "acme", turn, "charging you"))
	is.Equal(len(rep.Results), 1)
	is.Equal(len(rep.Results[0].OutboxIDs), 1) // one row enqueued
	id := rep.Results[0].OutboxIDs[0]
	now := time.Now()
	claims, err := store.ClaimDue(ctx, now, 1, "worker-that-dies", time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), 1) // claimed
	expired, err := store.ExpireClaims(ctx, now.Add(2*time.Minute))
	is.NoErr(err)
	is.Equal(expired, []turnframe.OutboxID{id}) // its lease ended: outcome unknown
	return id
}

// startUI starts 'turnframe ui' on path and returns the URL it prints and
// a function that interrupts it and checks that it exits cleanly.
func startUI(t *testing.T, bin, path string) (string, func()) {
	t.Helper()
	cmd := exec.Command(bin, "ui", "--db", path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	first, err := lines.ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("turnframe ui printed no URL: %v", err)
	}
	m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(first)
	if m == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("turnframe ui printed no loopback URL: %q", first)
	}
	stop := func() {
		t.Helper()
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(lines)
		if err := cmd.Wait(); err != nil {
			t.Errorf("turnframe ui did not stop cleanly: %v (it printed %q)", err, rest)
		}
	}
	return m[1], stop
}

// browser starts headless Chromium with the flags this machine needs (no
// sandbox as root, no GPU, no network of its own) and a fresh profile.
func browser(t *testing.T, ctx context.Context, exe string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	return bctx
}

func TestSettleInTheBrowser(t *testing.T) {
	exe := chromium(t)
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "app.db")
	id := unknownRow(t, path)
	url, stop := startUI(t, buildTurnframe(t), path)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bctx := browser(t, ctx, exe)
	shots, err := os.MkdirTemp("", "turnframe-uitest-")
	is.NoErr(err)
	form := "#settle-" + id.String()
	err = chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(form+" button")))
	is.NoErr(err) // the browser opened the page, with the row's settle form
	before, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	is.NoErr(err)
	is.NoErr(os.WriteFile(filepath.Join(shots, "1-overview.png"), before, 0o644))
	err = chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(form+" select"), "completed"),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="note"]`), "the remote has it: ch_42"),
		chromedp.Click(chromedp.CSS(form+" button")),
		chromedp.WaitVisible(chromedp.CSS("#flash.ok")),
	)
	is.NoErr(err) // it clicked settle and the page said it was done
	after, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	is.NoErr(err)
	is.NoErr(os.WriteFile(filepath.Join(shots, "2-settled.png"), after, 0o644))
	t.Logf("screenshots: %s", shots)
	flash, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#flash")))
	is.NoErr(err)
	back, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS("#back"), "href"))
	is.NoErr(err)
	is.True(regexp.MustCompile(`outcome_unknown → completed by operator`).MatchString(flash)) // the settle command's own line
	is.Equal(back.Value, "/")                                                                 // it links back to the page the form was on

	stop()
	stopped = true
	store, err := sqlitestore.Open(context.Background(), path, sqlitestore.WithExisting())
	is.NoErr(err)
	defer store.Close()
	rec, err := store.GetOutbox(context.Background(), id)
	is.NoErr(err)
	is.Equal(rec.Status, turnframe.OutboxCompleted) // the file holds the move
	is.Equal(rec.LastCode, "operator.completed")
	hist, err := store.History(context.Background(), turnframe.OutboxSubject("acme", id), 0, 100)
	is.NoErr(err)
	last := hist[len(hist)-1]
	is.Equal(last.Actor, turnframe.ActorOperator) // the history names the operator
	is.Equal(last.From, "outcome_unknown")
	is.Equal(last.To, "completed")
	is.Equal(last.Note, "the remote has it: ch_42") // with the note typed in the browser
}
