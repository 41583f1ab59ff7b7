package partlog

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// The broker's WAL record payloads are pinned by golden files:
//
//	testdata/batchrec-v1.bin   a RecBatch payload (topic ID, partition, batch v2 with offsets assigned)
//	testdata/link-v1.bin       a RecLink payload of a non-transactional batch (link v1)
//	testdata/link-v2.bin       a RecLink payload of a transactional batch (link v2: attributes)
//
// The record type byte is the version of a batch record: a new layout gets a new type
// (as RecOffsets was replaced), and replay keeps reading the old ones; a link has a
// version byte of its own (link.go). Regenerate deliberately with
//
//	go test ./broker/partlog/ -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func goldenBatchRec() []byte {
	b := kafkatest.Batch(42, 3, 7, []byte("alpha"), []byte("beta"))
	recbatch.SetOffsetEpoch(b, 1000, 5)
	return EncodeBatchRec(metadata.TopicID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 17, b)
}

func TestGoldenBatchRecord(t *testing.T) {
	path := filepath.Join("testdata", "batchrec-v1.bin")
	if *update {
		if err := os.WriteFile(path, goldenBatchRec(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(golden, goldenBatchRec()) {
		t.Fatalf("EncodeBatchRec no longer writes %s: a format change needs a new record type and a new golden file", path)
	}
	id, part, batch, err := DecodeBatchRec(golden)
	if err != nil {
		t.Fatal(err)
	}
	if id != (metadata.TopicID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) || part != 17 {
		t.Fatalf("decoded topic %x partition %d", id, part)
	}
	h, err := recbatch.ValidateProduce(batch, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 1000 || h.LeaderEpoch != 5 || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 7 || h.RecordCount != 2 {
		t.Fatalf("decoded batch %+v", h)
	}
	if _, _, _, err := DecodeBatchRec(golden[:BatchRecHdr+10]); err == nil {
		t.Fatal("a cut record decoded")
	}
}

func goldenLink(txn bool) Link {
	l := Link{Topic: metadata.TopicID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Partition: 17, Proxy: 4, ProxyEpoch: 9, Pos: 4096,
		Size: 120, CRC: 0xcafef00d, LastOffsetDelta: 2, MaxTimestamp: 1700000000000, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7,
		Base: 1000, LeaderEpoch: 5}
	if txn {
		l.Attributes = recbatch.AttrTransactional
	}
	return l
}

// RecLink payloads of both versions stay readable: a v1 record (written before links
// carried attributes, or of a non-transactional batch now) reads as not
// transactional, and is what AppendLink still writes for such a batch.
func TestGoldenLinkRecords(t *testing.T) {
	for _, v := range []struct {
		file string
		txn  bool
		size int
	}{{"link-v1.bin", false, LinkLenV1}, {"link-v2.bin", true, LinkLenV2}} {
		want := goldenLink(v.txn)
		path := filepath.Join("testdata", v.file)
		if *update {
			if err := os.WriteFile(path, AppendLink(nil, &want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		golden, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(golden, AppendLink(nil, &want)) {
			t.Fatalf("AppendLink no longer writes %s: a format change needs a new link version and a new golden file", path)
		}
		got, n, err := DecodeLink(golden)
		if err != nil || got != want || n != v.size || got.Transactional() != v.txn {
			t.Fatalf("%s decoded as %+v (%d bytes) %v, want %+v", path, got, n, err, want)
		}
	}
}
