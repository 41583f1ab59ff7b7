package controller

import "github.com/weir-io/weir/metadata"

// goldenStateV1 is the state held by testdata/snapshot-v1.json and
// testdata/snapshot-unversioned.json. Never change it: those files are frozen records of
// what controllers wrote. A new snapshot format gets a new file and a new function.
func goldenStateV1() State {
	orders := metadata.TopicID{'o', 'r', 'd', 'e', 'r', 's', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	events := metadata.TopicID{'e', 'v', 'e', 'n', 't', 's', 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
	return State{
		ClusterID:      "golden-cluster",
		Version:        17,
		NextProducerID: 2000,
		Brokers: map[int32]metadata.Broker{
			1: {ID: 1, Host: "weir-1.example", Port: 9092, Rack: "zone-a", Epoch: 3},
			2: {ID: 2, Host: "weir-2.example", Port: 9093, Rack: "zone-b", Epoch: 1},
			3: {ID: 3, Host: "weir-3.example", Port: 9094, Epoch: 2, State: metadata.BrokerFenced},
		},
		Topics: map[string]*metadata.Topic{
			"orders": {
				Name: "orders",
				ID:   orders,
				Partitions: []metadata.Partition{
					{
						// Moved from broker 1 to 2 at offset 42: a log chain of two WALs.
						Index: 0, Leader: 2, LeaderEpoch: 1,
						Logs:     []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 42}},
						MovingTo: -1,
						Objects: []metadata.ObjectRange{
							{Object: 1, FirstOffset: 0, LastOffset: 41, MaxTimestamp: 1_700_000_000_100, Bytes: 4096},
							{Object: 3, FirstOffset: 42, LastOffset: 99, MaxTimestamp: 1_700_000_000_900, Bytes: 3000},
						},
					},
					{
						// A move in progress, and a log start inside the first range.
						Index: 1, Leader: 1, LogStartOffset: 50,
						Logs:     []metadata.LogRange{{Broker: 1, StartOffset: 0}},
						MovingTo: 2, Moving: true,
						Objects: []metadata.ObjectRange{
							{Object: 1, FirstOffset: 40, LastOffset: 60, MaxTimestamp: 1_700_000_000_200, Bytes: 4000},
						},
					},
				},
				Configs: map[string]string{"retention.ms": "604800000", "cleanup.policy": "delete"},
			},
			"events": {
				Name: "events",
				ID:   events,
				Partitions: []metadata.Partition{{
					Index: 0, Leader: 1,
					Logs:     []metadata.LogRange{{Broker: 1, StartOffset: 0}},
					MovingTo: -1,
					// Committed before ranges recorded max_timestamp and bytes.
					Objects: []metadata.ObjectRange{{Object: 2, FirstOffset: 0, LastOffset: 9}},
				}},
			},
		},
		NextObjectID: 5,
		Objects: map[uint64]metadata.Object{
			1: {ID: 1, Key: "objects/00000000000000000001.obj", Size: 8192, State: metadata.ObjectCommitted, Broker: 1, Epoch: 3},
			2: {ID: 2, Key: "objects/00000000000000000002.obj", Size: 512, State: metadata.ObjectCommitted, Broker: 1, Epoch: 2},
			3: {ID: 3, Key: "objects/00000000000000000003.obj", Size: 3100, State: metadata.ObjectCommitted, Broker: 2, Epoch: 1},
			4: {ID: 4, Key: "objects/00000000000000000004.obj", State: metadata.ObjectPrepared, Broker: 2, Epoch: 1},
		},
	}
}
