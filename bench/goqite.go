package bench

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/maragudk/goqite"
)

// Goqite is goqite v0.2.3 (github.com/maragudk/goqite) over one file with
// the single-connection pool its README sets up. goqite brings no driver of
// its own, so it runs on modernc.org/sqlite like everyone else.
type Goqite struct {
	DB *sql.DB
	Q  *goqite.Queue
}

// OpenGoqite sets up goqite's schema in a fresh file.
func OpenGoqite(ctx context.Context, path string, s Sync) (*Goqite, error) {
	db, err := OpenDB(ctx, path, s, false, 1)
	if err != nil {
		return nil, err
	}
	if err := goqite.Setup(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("goqite setup: %w", err)
	}
	if _, err := db.ExecContext(ctx, appSchema); err != nil {
		db.Close()
		return nil, err
	}
	return &Goqite{DB: db, Q: goqite.New(goqite.NewOpts{DB: db, Name: "bench"})}, nil
}

// Close closes the file.
func (g *Goqite) Close() error { return g.DB.Close() }

// Enqueue is goqite's enqueue-in-tx: the application row and SendTx in one
// transaction.
func (g *Goqite) Enqueue(ctx context.Context, payload []byte) error {
	return inTx(ctx, g.DB, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO app_rows (payload) VALUES (?)`, payload); err != nil {
			return err
		}
		return g.Q.SendTx(ctx, tx, goqite.Message{Body: payload})
	})
}

// Seed sends n messages, 10k per transaction (untimed).
func (g *Goqite) Seed(ctx context.Context, n int) error {
	for done := 0; done < n; {
		k := min(10_000, n-done)
		err := inTx(ctx, g.DB, func(tx *sql.Tx) error {
			for range k {
				if err := g.Q.SendTx(ctx, tx, goqite.Message{Body: Payload()}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("goqite seed: %w", err)
		}
		done += k
	}
	return nil
}

// Drain receives and deletes messages, each in goqite's own transaction,
// until Receive finds none or upTo are drained (upTo <= 0: no limit), and
// returns how many it drained.
func (g *Goqite) Drain(ctx context.Context, upTo int) (int, error) {
	n := 0
	for upTo <= 0 || n < upTo {
		m, err := g.Q.Receive(ctx)
		if err != nil {
			return n, fmt.Errorf("goqite receive: %w", err)
		}
		if m == nil {
			return n, nil
		}
		if err := g.Q.Delete(ctx, m.ID); err != nil {
			return n, fmt.Errorf("goqite delete: %w", err)
		}
		n++
	}
	return n, nil
}
