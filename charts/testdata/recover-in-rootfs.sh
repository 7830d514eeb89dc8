#!/bin/bash
# Damages MariaDB's and RabbitMQ's files as an unclean stop or a bad disk does and runs the
# start scripts rendered from the charts against the real Debian packages of a rootfs:
# RabbitMQ moves an unreadable database aside by itself after 3 failed starts; MariaDB is
# never wiped, and starts again with the recovery options a human puts in
# osd-recovery-options, so its data can be dumped. Called by
# TestStatefulRecoveryInDebianRootfs inside `unshare -n -m -p -f --mount-proc`: every mount
# and process is private and goes away with the namespace; an overlay takes the changes.
# Usage: recover-in-rootfs.sh ROOTFS RENDERED-DIR SCRATCH-DIR
set -eu
LOWER=$1 O=$2 S=$3
R=$S/merged
mkdir -p $S/upper $S/work $R
mount -t overlay overlay -o lowerdir=$LOWER,upperdir=$S/upper,workdir=$S/work $R
ip link set lo up
mount -t proc proc $R/proc
mount --bind /dev $R/dev
for d in run var/lib/mysql var/lib/rabbitmq var/log; do mkdir -p $R/$d; mount -t tmpfs tmpfs $R/$d; done
mkdir -p $R/run/mysqld $R/run/osd-rabbitmq $R/var/log/rabbitmq
chmod 1777 $R/run/osd-rabbitmq
chroot $R chown mysql:mysql /var/lib/mysql /run/mysqld
chroot $R chown rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq
hex() { head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ROOTPW=$(hex) RABBITPW=$(hex) COOKIE=$(hex)
as() { local u=$1; shift; chroot --userspec=$u:$u $R env HOME=/var/lib/$u "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

cp $O/rabbitmq.conf $O/rabbitmq-env.conf $R/etc/rabbitmq/
rabbit() { as rabbitmq RABBITMQ_PASSWORD_NOVA=$RABBITPW RABBITMQ_PASSWORD_NEUTRON=$(hex) RABBITMQ_PASSWORD_CINDER=$(hex) RABBITMQ_PASSWORD_HEAT=$(hex) ERLANG_COOKIE=$COOKIE timeout 300 /bin/sh -ec "$(cat $O/rabbitmq.sh)" >> $S/rabbitmq.log 2>&1; }
rabbit_ready() {
  for i in $(seq 1 150); do
    as rabbitmq $(cat $O/rabbitmq.probe.shell) -c "$(cat $O/rabbitmq.probe)" >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}
rabbit & pid=$!
rabbit_ready || fail "rabbitmq did not become ready"
as rabbitmq rabbitmqctl -q stop >/dev/null; wait $pid || true
M=$R/var/lib/rabbitmq/mnesia/rabbit@localhost
dd if=/dev/urandom of=$M/schema.DAT bs=512 count=4 conv=notrunc 2>/dev/null
cp $M/schema.DAT $S/schema.DAT.damaged
for i in 1 2 3; do
  rc=0; rabbit || rc=$?
  pkill -KILL -u rabbitmq || true   # what is left of the failed start (its user step) dies with the container
  echo "rabbitmq start $i with a damaged schema.DAT: exit status $rc"
  grep -q "Cannot read schema" $S/rabbitmq.log || fail "rabbitmq start $i: no 'Cannot read schema' line"
  [ ! -e $R/var/lib/rabbitmq/mnesia.broken-* ] || fail "moved aside before 3 failed starts"
done
rabbit & pid=$!
rabbit_ready || { tail -20 $S/rabbitmq.log; fail "rabbitmq not ready after its database was moved aside"; }
grep "osd: rabbitmq did not start 3 times in a row: moved its database aside to" $S/rabbitmq.log || fail "no line saying the database was moved aside"
cmp $R/var/lib/rabbitmq/mnesia.broken-*/rabbit@localhost/schema.DAT $S/schema.DAT.damaged || fail "the database moved aside is not the damaged one"
as rabbitmq rabbitmqctl -q list_users | grep -q '^nova' || fail "rabbitmq user not re-created"
[ ! -e $R/var/lib/rabbitmq/osd-failed-starts ] || fail "failed-start count not reset after a good start"
as rabbitmq rabbitmqctl -q stop >/dev/null; wait $pid || true
echo "rabbitmq: database moved aside after 3 failed starts, ready again with user nova"

maria() { as mysql ROOT_PASSWORD=$ROOTPW timeout 120 /bin/sh -ec "$(cat $O/mariadb.sh)" >> $S/mariadb.log 2>&1; }
maria_ping() {
  for i in $(seq 1 60); do
    as mysql mysqladmin --connect-timeout=3 ping >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}
maria & pid=$!
maria_ping || { tail -20 $S/mariadb.log; fail "mariadb did not start"; }
for i in $(seq 1 30); do as mysql mariadb -h127.0.0.1 -uroot -p$ROOTPW -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 1; done
as mysql mariadb -h127.0.0.1 -uroot -p$ROOTPW -e "CREATE DATABASE nova; CREATE TABLE nova.kept (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO nova.kept VALUES (42)"
as mysql mysqladmin -h127.0.0.1 -uroot -p$ROOTPW shutdown; wait $pid || true
maria & pid=$!
maria_ping || { tail -20 $S/mariadb.log; fail "mariadb did not start again"; }
for i in $(seq 1 30); do as mysql mariadb -h127.0.0.1 -uroot -p$ROOTPW -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 1; done
as mysql mariadb -h127.0.0.1 -uroot -p$ROOTPW -e "INSERT INTO nova.kept VALUES (43)"
pkill -KILL -x mariadbd; wait $pid || true     # an unclean stop
dd if=/dev/urandom of=$R/var/lib/mysql/ib_logfile0 bs=4096 count=4 conv=notrunc 2>/dev/null
if maria; then fail "mariadb started with a damaged redo log"; fi
grep -q "InnoDB: Invalid log header checksum" $S/mariadb.log || fail "no 'Invalid log header checksum' line"
[ -e $R/var/lib/mysql/nova/kept.ibd ] || fail "the data was removed"
echo "mariadb with a damaged redo log fails and keeps its files"
echo '--innodb-force-recovery=6' > $R/var/lib/mysql/osd-recovery-options
maria & pid=$!
maria_ping || { tail -20 $S/mariadb.log; fail "mariadb did not start with --innodb-force-recovery=6"; }
grep -q "osd: starting mariadbd with the recovery options in /var/lib/mysql/osd-recovery-options: --innodb-force-recovery=6" $S/mariadb.log || fail "no line naming the recovery options"
# The remedy's own commands: dump as root with the chart's password over loopback.
# (--force goes on past a table it cannot read and exits 2 in the end: the content tells.)
as mysql env ROOT_PASSWORD=$ROOTPW sh -c 'exec mariadb-dump -h127.0.0.1 -uroot -p"$ROOT_PASSWORD" --all-databases --force --flush-privileges' > $S/dump.sql || echo "mariadb-dump exit status $?"
# (mariadb-dump writes one row a line after "INSERT INTO `kept` VALUES".)
grep -A2 'INSERT INTO `kept` VALUES' $S/dump.sql | grep -q '^(42)[,;]' || { grep -A3 -n 'kept' $S/dump.sql | cut -c1-100 | head -20; fail "the dump lacks the row written before the last clean stop"; }
grep -q 'INSERT INTO `global_priv`' $S/dump.sql || fail "the dump lacks the accounts"
as mysql mysqladmin -h127.0.0.1 -uroot -p$ROOTPW shutdown; wait $pid || true
echo "mariadb started in recovery mode from osd-recovery-options and its data was dumped"
# Start afresh (the data directory moved aside: here its content, the directory is a mount) and restore.
mkdir $S/damaged && mv $R/var/lib/mysql/* $S/damaged/
maria & pid=$!
maria_ping || { tail -20 $S/mariadb.log; fail "a fresh mariadb did not start"; }
for i in $(seq 1 30); do as mysql mariadb -h127.0.0.1 -uroot -p$ROOTPW -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 1; done
as mysql env ROOT_PASSWORD=$ROOTPW sh -c 'exec mariadb -h127.0.0.1 -uroot -p"$ROOT_PASSWORD"' < $S/dump.sql || fail "restoring the dump"
got=$(as mysql mariadb -h127.0.0.1 -uroot -p$ROOTPW -N -e 'SELECT id FROM nova.kept') || fail "root cannot log in after the restore"
case "$got" in 42|"42
43") ;; *) fail "restored rows = $got, want 42 (and 43 if the redo log had kept it)" ;; esac
as mysql mysqladmin -h127.0.0.1 -uroot -p$ROOTPW shutdown; wait $pid || true
echo "mariadb restored from the dump into a fresh data directory"
echo "ALL OK"
