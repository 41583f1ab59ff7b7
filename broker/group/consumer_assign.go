package group

// consumer_assign.go holds the server-side assignors of consumer groups (KIP-848):
//
//	uniform  every partition of the subscribed topics goes to one member subscribed to
//	         its topic, members' counts differing by at most one among members with
//	         the same subscription; sticky: a partition stays with its previous target
//	         owner while that owner is within its quota (Kafka's UniformAssignor);
//	range    per topic, the members subscribed to it (by member ID) get consecutive
//	         ranges, the first ones one partition more (Kafka's RangeAssignor, without
//	         its stickiness).
//
// Racks are recorded but not used (no rack-aware placement).

import "sort"

type assignMember struct {
	id     string
	topics []string // subscribed topics that exist, sorted
	prev   parts    // previous target
}

// assign computes every member's target.
func assign(name string, ms []assignMember, sub map[string]TopicInfo) map[string]parts {
	if name == "range" {
		return assignRange(ms, sub)
	}
	return assignUniform(ms, sub)
}

func assignRange(ms []assignMember, sub map[string]TopicInfo) map[string]parts {
	out := make(map[string]parts, len(ms))
	byTopic := map[string][]string{}
	for _, m := range ms {
		out[m.id] = parts{}
		for _, t := range m.topics {
			byTopic[t] = append(byTopic[t], m.id)
		}
	}
	for t, ids := range byTopic {
		sort.Strings(ids)
		n := int(sub[t].Partitions)
		per, extra := n/len(ids), n%len(ids)
		next := 0
		for i, id := range ids {
			cnt := per
			if i < extra {
				cnt++
			}
			for p := next; p < next+cnt; p++ {
				out[id][t] = append(out[id][t], int32(p))
			}
			next += cnt
		}
	}
	return out
}

func assignUniform(ms []assignMember, sub map[string]TopicInfo) map[string]parts {
	out := make(map[string]parts, len(ms))
	load := make(map[string]int, len(ms))
	subscribers := map[string][]string{}
	for _, m := range ms {
		out[m.id] = parts{}
		for _, t := range m.topics {
			subscribers[t] = append(subscribers[t], m.id)
		}
	}
	// Quota of a member: its fair share of the partitions of its topics, shared with
	// everyone subscribed to each of them (exact when subscriptions are alike).
	quota := make(map[string]int, len(ms))
	for _, m := range ms {
		share := 0.0
		for _, t := range m.topics {
			share += float64(sub[t].Partitions) / float64(len(subscribers[t]))
		}
		quota[m.id] = int(share)
		if float64(int(share)) < share {
			quota[m.id]++
		}
	}
	// Homogeneous groups: exactly total/n, the first total%n members one more.
	total := 0
	for t := range subscribers {
		total += int(sub[t].Partitions)
	}
	owner := map[tpKey]string{}
	subscribed := func(id, t string) bool {
		for _, s := range subscribers[t] {
			if s == id {
				return true
			}
		}
		return false
	}
	// Sticky pass: keep previous targets within the floor of the quota first.
	topics := make([]string, 0, len(subscribers))
	for t := range subscribers {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	floor := func(id string) int {
		m := quota[id]
		if len(ms) > 0 && total%len(ms) != 0 && m > 0 {
			return m - 1
		}
		return m
	}
	for _, pass := range []func(string) int{floor, func(id string) int { return quota[id] }} {
		for _, m := range ms {
			for _, t := range sortedKeys(m.prev) {
				if !subscribed(m.id, t) {
					continue
				}
				for _, p := range m.prev[t] {
					k := tpKey{t, p}
					if p >= sub[t].Partitions || owner[k] != "" || load[m.id] >= pass(m.id) {
						continue
					}
					owner[k] = m.id
					load[m.id]++
				}
			}
		}
	}
	// Fill: every unowned partition to the least loaded subscriber (ties by ID).
	for _, t := range topics {
		ids := append([]string(nil), subscribers[t]...)
		sort.Strings(ids)
		for p := int32(0); p < sub[t].Partitions; p++ {
			k := tpKey{t, p}
			if owner[k] != "" {
				continue
			}
			best := ""
			for _, id := range ids {
				if best == "" || load[id] < load[best] {
					best = id
				}
			}
			owner[k] = best
			load[best]++
		}
	}
	// Balance: move from the most to the least loaded subscriber while they differ by
	// more than one.
	for moved := true; moved; {
		moved = false
		for _, t := range topics {
			for p := int32(0); p < sub[t].Partitions; p++ {
				k := tpKey{t, p}
				from := owner[k]
				for _, id := range subscribers[t] {
					if load[from]-load[id] > 1 {
						owner[k] = id
						load[from]--
						load[id]++
						moved = true
						break
					}
				}
			}
		}
	}
	for k, id := range owner {
		out[id][k.topic] = append(out[id][k.topic], k.part)
	}
	for _, ps := range out {
		for t := range ps {
			sort.Slice(ps[t], func(i, j int) bool { return ps[t][i] < ps[t][j] })
		}
	}
	return out
}

func sortedKeys(ps parts) []string {
	out := make([]string, 0, len(ps))
	for t := range ps {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
