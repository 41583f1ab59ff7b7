package metadata

// goldenLocalStateV1 is the state held by testdata/metadata-v1.json and
// testdata/metadata-unversioned.json (which OpenLocal reads as version 1, hence
// FormatVersion 1 for both). Never change it: those files are frozen records of
// what LocalStore wrote. A new format gets a new file and a new function.
func goldenLocalStateV1() localState {
	orders := TopicID{'o', 'r', 'd', 'e', 'r', 's', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	events := TopicID{'e', 'v', 'e', 'n', 't', 's', 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
	return localState{
		FormatVersion:  1,
		ClusterID:      "golden-local-cluster",
		Version:        23,
		NextProducerID: 7,
		Topics: map[string]*Topic{
			"orders": {
				Name: "orders",
				ID:   orders,
				Partitions: []Partition{
					{Index: 0, Leader: 1, Objects: []ObjectRange{
						{Object: 1, FirstOffset: 0, LastOffset: 41, MaxTimestamp: 1_700_000_000_100, Bytes: 4096},
						{Object: 3, FirstOffset: 42, LastOffset: 99, MaxTimestamp: 1_700_000_000_900, Bytes: 3000},
					}},
					{Index: 1, Leader: 1, LogStartOffset: 50, Objects: []ObjectRange{
						{Object: 1, FirstOffset: 40, LastOffset: 60, MaxTimestamp: 1_700_000_000_200, Bytes: 4000},
					}},
					{Index: 2, Leader: 1, LogStartOffset: 12},
				},
				Configs: map[string]string{"retention.ms": "604800000", "cleanup.policy": "compact,delete"},
			},
			"events": {
				Name: "events",
				ID:   events,
				Partitions: []Partition{{
					Index: 0, Leader: 1,
					// Committed before ranges recorded max_timestamp and bytes.
					Objects: []ObjectRange{{Object: 2, FirstOffset: 0, LastOffset: 9}},
				}},
			},
		},
		NextObjectID: 5,
		Objects: map[uint64]Object{
			1: {ID: 1, Key: "objects/00000000000000000001.obj", Size: 8192, State: ObjectCommitted, Broker: 1, Epoch: localEpoch},
			2: {ID: 2, Key: "objects/00000000000000000002.obj", Size: 512, State: ObjectCommitted, Broker: 1, Epoch: localEpoch},
			3: {ID: 3, Key: "objects/00000000000000000003.obj", Size: 3100, State: ObjectCommitted, Broker: 1, Epoch: localEpoch},
			4: {ID: 4, Key: "objects/00000000000000000004.obj", State: ObjectPrepared, Broker: 1, Epoch: localEpoch},
		},
	}
}
