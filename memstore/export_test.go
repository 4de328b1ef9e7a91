package memstore

import "github.com/turnframe/turnframe"

// PutOutbox stores r as it is, enqueued after every row already held, with
// none of the checks Apply makes: for the external tests of a store that
// already holds a row, such as one an older key scheme wrote.
func PutOutbox(s *Store, r turnframe.OutboxRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.outbox[r.ID] = &outboxRow{rec: copyRecord(r), seq: s.seq}
	s.rowKeys[rowKey{r.Account, r.Key}] = r.ID
}
