// Package uitest drives 'turnframe ui' in a real browser: headless Chromium
// from Debian's chromium package, through the DevTools protocol (chromedp).
// It is a module of its own so that the root module keeps its four
// dependencies; it holds only tests.
//
//	apt-get install -y chromium   # once
//	cd uitest && go test ./...
//
// Without Chromium the test skips, saying so, unless CI=true, where it fails.
package uitest
