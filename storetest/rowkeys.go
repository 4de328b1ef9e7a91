package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of idempotency keys at the edges: which command keys a store
// takes (issue 12 item 1), and the keys of the outbox rows it derives from
// them, unique per account (issue 11 item 3).

func rowKeyTests() []test {
	return []test{
		{"OneRowOfACommandKeepsTheCommandsKey", testRowKeyOne},
		{"SeveralRowsOfOneCommandAreKeyedKeyTildeN", testRowKeysSeveral},
		{"ACommandKeyedKSlash1AndACommandKWithTwoRowsGetDistinctRowKeys", testRowKeysDistinct},
		{"NoTwoRowsOfAnAccountEverShareAKeyPruningIncluded", testRowKeysProperty},
		{"AnAdmitWithAKeyARemoteWouldNotReceiveAsItIsIsInvalidAndWritesNothing", testBadKeys},
		{"AKeyWithAnInteriorSpaceOrNonASCIIIsAcceptedAndReadsBackAsItself", testGoodKeys},
	}
}

// commitKeyed begins a turn of account at now, admits one command under key
// and commits it with n outbox rows: the rows as Apply reported them.
func (e *env) commitKeyed(account turnframe.AccountID, key turnframe.IdempotencyKey, n int, now time.Time) []turnframe.OutboxEntry {
	e.t.Helper()
	c := turnframe.CaseKey(e.fresh("case"))
	attempt := e.ids.AttemptID(now)
	w := e.beginWrite(account, now)
	w.Admit = []turnframe.Command{command(key, c)}
	w.Settle = []turnframe.Settlement{take(key, attempt, turnframe.AttemptID{})}
	e.apply(w)
	msgs := make([]turnframe.OutboxMessage, n)
	for i := range msgs {
		msgs[i] = message("")
	}
	return e.commit(account, w.Turn, key, attempt, now, nil, msgs).Outbox
}

// rowKeys returns the stored keys of rows.
func (e *env) rowKeys(rows []turnframe.OutboxEntry) []turnframe.IdempotencyKey {
	e.t.Helper()
	keys := make([]turnframe.IdempotencyKey, len(rows))
	for i, r := range rows {
		keys[i] = e.row(r.ID).Key
	}
	return keys
}

func testRowKeyOne(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.commitKeyed(acme, "order-7", 1, at(0))
	is.Equal(rows[0].Key, turnframe.IdempotencyKey("order-7"))                                        // applied
	is.Equal(e.rowKeys(rows), []turnframe.IdempotencyKey{"order-7"})                                  // stored: the command's key, unchanged
	is.Equal(e.row(rows[0].ID).RemoteKey(), rows[0].RemoteKey())                                      // the remote key follows the stored key
	is.Equal(rows[0].RemoteKey(), (turnframe.OutboxEntry{Account: acme, Key: "order-7"}).RemoteKey()) // of the account and the command key
}

func testRowKeysSeveral(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.commitKeyed(acme, "order-7", 3, at(0))
	want := []turnframe.IdempotencyKey{"order-7~1", "order-7~2", "order-7~3"}
	is.Equal(e.rowKeys(rows), want) // k~1, k~2, k~3 in order
	for i, r := range rows {
		is.Equal(r.Key, want[i]) // applied as stored
	}
}

func testRowKeysDistinct(t *testing.T, e *env) {
	for _, tc := range []struct {
		name   string
		first  turnframe.IdempotencyKey
		second turnframe.IdempotencyKey
	}{
		{"SlashFirst", "k/1", "k"},
		{"PlainFirst", "k", "k/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			n := map[turnframe.IdempotencyKey]int{"k/1": 1, "k": 2}
			rows := e.commitKeyed(acme, tc.first, n[tc.first], at(0))
			rows = append(rows, e.commitKeyed(acme, tc.second, n[tc.second], at(time.Second))...)
			is.Equal(len(rows), 3) // three rows
			seen := make(map[turnframe.IdempotencyKey]bool)
			remote := make(map[string]bool)
			for _, k := range e.rowKeys(rows) {
				is.True(!seen[k]) // no two rows share a key
				seen[k] = true
			}
			for _, r := range rows {
				rk := e.row(r.ID).RemoteKey()
				is.True(!remote[rk]) // nor a remote key
				remote[rk] = true
			}
			is.True(seen["k/1"] && seen["k~1"] && seen["k~2"]) // k/1 kept whole; k's rows k~1 and k~2
		})
	}
}

func testRowKeysProperty(t *testing.T, e *env) {
	const seed = 11
	commands := 160
	if testing.Short() {
		commands = 60
	}
	rng := rand.New(rand.NewPCG(seed, 0x6b657973))
	const alphabet = "k/1-2"
	randomKey := func() turnframe.IdempotencyKey {
		b := make([]byte, 1+rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return turnframe.IdempotencyKey(b)
	}
	accounts := []turnframe.AccountID{acme, globex}
	used := make(map[keyRef]bool)     // command keys admitted
	issued := make(map[keyRef]string) // every row key ever enqueued, with the row and command it came from
	remote := make(map[string]string) // every remote key ever enqueued
	now := base
	pruned := 0
	for i := 0; i < commands; i++ {
		now = now.Add(time.Second)
		account := accounts[rng.IntN(len(accounts))]
		key := randomKey()
		if used[keyRef{account, key}] {
			continue // a key is one command, for ever: the journal returns it without running it
		}
		used[keyRef{account, key}] = true
		for j, r := range e.commitKeyed(account, key, 1+rng.IntN(3), now) {
			what := fmt.Sprintf("row %d of command %q", j, key)
			if prev, ok := issued[keyRef{account, r.Key}]; ok {
				t.Fatalf("seed %d: %s of %q has key %q, as %s had", seed, what, account, r.Key, prev)
			}
			issued[keyRef{account, r.Key}] = what
			rk := e.row(r.ID).RemoteKey()
			if prev, ok := remote[rk]; ok {
				t.Fatalf("seed %d: %s of %q has remote key %q, as %s had", seed, what, account, rk, prev)
			}
			remote[rk] = fmt.Sprintf("%s of %q", what, account)
		}
		// Now and then, send everything due and prune what finished.
		if rng.IntN(8) == 0 {
			cs, err := e.s.ClaimDue(e.ctx, now, turnframe.MaxLimit, worker, lease)
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			for _, c := range cs {
				if err := turnframe.CompleteClaim(e.ctx, e.s, c, "", now); err != nil {
					t.Fatalf("complete: %v", err)
				}
			}
			n, err := e.s.Prune(e.ctx, now.Add(time.Microsecond))
			if err != nil {
				t.Fatalf("prune: %v", err)
			}
			pruned += n
		}
		// The rows the store holds share no key within an account.
		rows, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
		if err != nil {
			t.Fatalf("list outbox: %v", err)
		}
		held := make(map[keyRef]bool)
		for _, r := range rows {
			k := keyRef{r.Account, r.Key}
			if held[k] {
				t.Fatalf("seed %d: two rows of %q share key %q", seed, r.Account, r.Key)
			}
			held[k] = true
		}
	}
	if pruned == 0 {
		t.Fatalf("seed %d: nothing was pruned, so pruning was not tried", seed)
	}
}

func testBadKeys(t *testing.T, e *env) {
	turn := e.begin(acme, at(0))
	for _, tc := range []struct {
		name string
		key  turnframe.IdempotencyKey
	}{
		{"TrailingSpace", "k1 "},
		{"LeadingSpace", " k1"},
		{"TrailingTab", "k1\t"},
		{"InteriorTab", "k\t1"}, // a tab is a control character wherever it is
		{"InteriorNewline", "a\nb"},
		{"CarriageReturn", "k1\r"},
		{"Delete", "k\x7f1"},
		{"LeadingNoBreakSpace", "\u00a0k1"},
		{"TrailingIdeographicSpace", "k1\u3000"},
		{"TheRowKeySeparator", "k~1"},
		{"OnlyTheSeparator", "~"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Into an existing turn, and into a turn the same Write begins.
			w := turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Admit: []turnframe.Command{command(tc.key, "booking/1")}}
			e.note(w)
			before := e.snapshot()
			_, err := e.s.Apply(e.ctx, w)
			isInvalid(t, err, "admit[0].key", "admit")
			e.unchanged(before, "admit of a bad key")

			b := e.beginWrite(acme, at(time.Second))
			b.Admit = []turnframe.Command{command(tc.key, "booking/1")}
			e.note(b)
			before = e.snapshot()
			_, err = e.s.Apply(e.ctx, b)
			isInvalid(t, err, "admit[0].key", "begin and admit")
			e.unchanged(before, "begin and admit of a bad key")
		})
	}
}

func testGoodKeys(t *testing.T, e *env) {
	for _, key := range []turnframe.IdempotencyKey{"k 1", "clé-1", "予約/7", "k%201", "ключ 9"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			is := is.New(t)
			rows := e.commitKeyed(acme, key, 2, at(0))
			is.Equal(e.entry(acme, key).Key, key)                                         // admitted under the key as it is
			is.Equal(e.rowKeys(rows), []turnframe.IdempotencyKey{key + "~1", key + "~2"}) // and its rows under it
			_, err := e.s.ByKey(e.ctx, acme, key+" ")
			is.True(errors.Is(err, turnframe.ErrInvalid) || errors.Is(err, turnframe.ErrNotFound)) // a trailing space is another key, never this one
		})
	}
}
