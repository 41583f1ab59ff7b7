// Package tier is a broker's object tier: with an object store and a metadata store that
// keeps object manifests (metadata.ObjectManifest), it uploads the WAL's synced data to
// objects (uploader.go), trims the WAL below what is uploaded and what other brokers still
// read (trim.go), serves old offsets from objects (reads.go, through objread), applies
// retention and deletes objects no one needs (retention.go), and slows or refuses produce
// while uploads lag (Admit). Without it, the WAL keeps everything.
//
// It works on the partitions the broker leads (partlog.Partition) through their tier
// methods and never holds a partition's lock itself.
//
// Lock rules: Tier.pinMu (WAL pins) and Tier.upMu (prepared objects in use) are leaves;
// trimming takes each partition's lock on its own, never two at once. The upload and
// retention loops are the only goroutines Tier starts; Close stops them before it closes
// the object reader.
package tier
