"""librdkafka's transactional producer (confluent-kafka-python, Debian's python3-confluent-kafka
on librdkafka 2.0.2) against a Weir broker: commit, abort, commit; a read_committed consumer
reads the committed records only, a read_uncommitted one all of them. Exit 0 and "OK" on
success; a message and exit 1 otherwise."""
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1]
topic = 'rdkafka-tx'

admin = AdminClient({'bootstrap.servers': bootstrap})
for _, f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).items():
    f.result()

p = Producer({'bootstrap.servers': bootstrap, 'transactional.id': 'rdkafka-tx', 'enable.idempotence': True})
p.init_transactions(30)
for values, commit in [(['c-0', 'c-1', 'c-2'], True), (['a-0', 'a-1'], False), (['c-3'], True)]:
    p.begin_transaction()
    for v in values:
        p.produce(topic, v.encode())
    p.flush(30)  # written before the end: an abort would purge what is still queued
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
print('step transactions: commit, abort, commit', flush=True)


def read(isolation, want):
    c = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'rdkafka-tx-' + isolation,
                  'auto.offset.reset': 'earliest', 'isolation.level': isolation, 'enable.auto.commit': False})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 30
    settle = None
    while time.time() < deadline:
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.append(m.value().decode())
        if len(got) >= want:
            settle = settle or time.time() + 1  # a little longer: nothing more may come
            if time.time() > settle:
                break
    c.close()
    return sorted(got)


committed = read('read_committed', 4)
if committed != ['c-0', 'c-1', 'c-2', 'c-3']:
    print('FAIL read_committed read %s, want c-0..c-3 (a-0, a-1 were aborted)' % committed)
    sys.exit(1)
everything = read('read_uncommitted', 6)
if everything != ['a-0', 'a-1', 'c-0', 'c-1', 'c-2', 'c-3']:
    print('FAIL read_uncommitted read %s, want all six' % everything)
    sys.exit(1)
print('step read_committed and read_uncommitted', flush=True)
print('OK librdkafka transactions')
