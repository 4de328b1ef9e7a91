package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe"
)

// checkServerEncoding returns ErrInvalid for a database whose encoding
// converts text: the store's strings must read back byte for byte. pgx
// sends and reads UTF-8 but sets no client_encoding, so a session on a
// LATIN1 database reads in LATIN1, while the store's write transactions set
// UTF8 (settings.go): "café" was written converted and read back as
// "caf\xe9", and a "€" could not be written at all. UTF8 keeps every string
// as it is, and SQL_ASCII keeps bytes as they come, converting nothing.
func checkServerEncoding(ctx context.Context, pool *pgxpool.Pool) error {
	var enc string
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_encoding')`).Scan(&enc); err != nil {
		return translate(ctx, err)
	}
	switch enc {
	case "UTF8", "SQL_ASCII":
		return nil
	}
	return fmt.Errorf("%w: the database's encoding is %s, which converts text; pgstore needs a database "+
		"created with ENCODING 'UTF8' (nothing was created)", turnframe.ErrInvalid, enc)
}
