package turnframe_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// DESIGN.md §8: a keeper extends the lease of every row it has not settled
// "every LeaseMargin/2"; between extensions it looks for a forward step of
// the wall clock at least every second. Its looks rounded the half margin
// up to whole seconds: with a margin of 2.02 s it extended every 2 s, and
// the lease had SendTimeout + 20 ms left at each extension instead of half
// a margin. The looks now divide the half margin exactly.
func TestAKeeperExtendsEveryHalfMarginAndLooksAtLeastEverySecond(t *testing.T) {
	for _, margin := range []time.Duration{
		time.Nanosecond, 10 * time.Millisecond, time.Second, 2 * time.Second, 2020 * time.Millisecond,
		3 * time.Second, 4100 * time.Millisecond, 30 * time.Second, 7 * time.Minute, 24 * time.Hour,
	} {
		t.Run(fmt.Sprint(margin), func(t *testing.T) {
			is := is.New(t)
			look, looks := turnframe.KeeperCadence(margin)
			every := max(margin/2, time.Millisecond)
			is.True(looks >= 1)          // it extends
			is.True(look <= time.Second) // it looks at least every second
			is.True(look > 0)            // and never spins
			span := time.Duration(looks) * look
			is.True(span <= every && every-span < time.Duration(looks)) // it extends every half margin (to a nanosecond a look)
		})
	}
}
