package controller

import (
	"fmt"
	"strings"
	"time"
)

// idleNote says why a round that moves nothing leaves the brokers as they are, in terms
// of the numbers printed beside it. A bare "balanced" next to "imbalance 200%" read as a
// contradiction: the imbalance is a ratio to the mean (one partition over three brokers
// is 200%), while the balancer moves only what is beyond its band of max(1 partition,
// 10%) around the mean (balanceThreshold), and never moves partitions that are
// recovering, cooling down or too costly. So the note is "balanced" only when every
// accepting broker is inside the band, and says so with the band; otherwise it names
// what holds the moves back.
func idleNote(accepting []*balBroker, mean float64, canTarget func(*balBroker) bool, cooldown time.Duration) string {
	thr := balanceThreshold(mean)
	var out []*balBroker // beyond the band, above or below; by ID, as accepting is
	for _, b := range accepting {
		if b.cost-mean > thr || mean-b.cost > thr {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("balanced: every broker within %.1f of the mean cost %.1f (the balancer's band: one partition, or 10%% of the mean if more)", thr, mean)
	}
	var silent []string
	lowest := -1.0 // the least loaded broker a move may go to
	for _, b := range accepting {
		if !canTarget(b) {
			if b.cost < mean {
				silent = append(silent, fmt.Sprint(b.b.ID))
			}
			continue
		}
		if lowest < 0 || b.cost < lowest {
			lowest = b.cost
		}
	}
	cooled, recovering, costly := 0, 0, 0
	for _, b := range accepting {
		if b.cost <= mean {
			continue
		}
		cooled += b.cooled
		recovering += b.recovering
		for _, c := range b.cands {
			if lowest >= 0 && c.cost >= b.cost-lowest {
				costly++
			}
		}
	}
	var why []string
	if len(silent) > 0 {
		why = append(why, fmt.Sprintf("broker %s may not be given partitions (not heard from within the lease)", strings.Join(silent, ", ")))
	}
	if lowest < 0 {
		why = append(why, "no broker may be given partitions")
	}
	if cooled > 0 {
		why = append(why, fmt.Sprintf("%d partitions of the brokers above the mean were moved by the balancer within the cooldown (%v)", cooled, cooldown))
	}
	if recovering > 0 {
		why = append(why, fmt.Sprintf("%d are recovering (moved once their new leader has read the failed broker's WAL)", recovering))
	}
	if costly > 0 {
		why = append(why, fmt.Sprintf("%d are too costly to move without overshooting (hot partitions)", costly))
	}
	if len(why) == 0 {
		why = append(why, "each zone is within the band of its share and each broker within the band of its zone's mean")
	}
	var beyond []string
	for _, b := range out {
		beyond = append(beyond, fmt.Sprintf("%d (cost %.1f)", b.b.ID, b.cost))
	}
	return fmt.Sprintf("left uneven: broker %s beyond %.1f of the mean cost %.1f, but %s", strings.Join(beyond, ", "), thr, mean, strings.Join(why, "; "))
}
