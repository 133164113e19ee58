#!/usr/bin/python3
"""Retrying conflicts, as an application on a Lockstep (or Galera) cluster must.

One client per node adds 1 to the same counter COUNT times, each time with a
read-modify-write transaction (SELECT the value, UPDATE it to value + 1), and
retries every transaction that fails with a conflict error. At the end the
counter is read on every node (causal reads) and compared with the number of
acknowledged increments.

    python3 docs/examples/retry.py 200 /tmp/lockstep-demo/node{1,2,3}/mysqld.sock
    python3 docs/examples/retry.py --snapshot-isolation=off 200 ...   # see updates lost

With innodb_snapshot_isolation=ON (what `lockstep up` sets) every
acknowledged increment is in the counter; a transaction that read a value
another one changed meanwhile fails with 1020 and is retried. With OFF,
InnoDB's repeatable read lets the UPDATE overwrite the newer value: the
increment is acknowledged and lost. Exit status: 1 when an acknowledged
increment is missing with snapshot isolation on, or on an error not retried.
Needs PyMySQL (Debian: python3-pymysql); connects as root over each socket.
"""

import argparse
import sys
import threading

import pymysql

# The errors that mean "conflict, try again": 1213 (a certification conflict
# with another node's transaction, or a deadlock), 1020 (the row changed
# since this transaction's snapshot: innodb_snapshot_isolation=ON), 1205
# (lock wait timeout).
RETRY = {1213, 1020, 1205}


def in_transaction(conn, work, attempts=100):
    """Runs work(cursor) in a transaction until it commits; returns the tries."""
    for attempt in range(1, attempts + 1):
        try:
            conn.begin()
            with conn.cursor() as cur:
                work(cur)
            conn.commit()
            return attempt
        except pymysql.MySQLError as e:
            conn.rollback()
            if e.args[0] not in RETRY or attempt == attempts:
                raise


def add_one(cur):
    cur.execute("SELECT n FROM demo.counter WHERE id = 1")
    (n,) = cur.fetchone()
    cur.execute("UPDATE demo.counter SET n = %s WHERE id = 1", (n + 1,))


def connect(socket, snapshot_isolation):
    conn = pymysql.connect(unix_socket=socket, user="root", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SET SESSION innodb_snapshot_isolation = %s", (snapshot_isolation,))
    return conn


def client(socket, count, snapshot_isolation, tally, errors):
    try:
        conn = connect(socket, snapshot_isolation)
        for _ in range(count):
            tries = in_transaction(conn, add_one)
            with tally["lock"]:
                tally["acknowledged"] += 1
                tally["retries"] += tries - 1
    except pymysql.MySQLError as e:
        errors.append(f"{socket}: {e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot-isolation", choices=["on", "off"], default="on")
    parser.add_argument("count", type=int, help="increments per node")
    parser.add_argument("sockets", nargs="+", help="each node's unix socket")
    args = parser.parse_args()
    snapshot_isolation = args.snapshot_isolation.upper()

    setup = connect(args.sockets[0], snapshot_isolation)
    with setup.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS demo")
        cur.execute("CREATE TABLE IF NOT EXISTS demo.counter (id INT PRIMARY KEY, n INT NOT NULL)")
        cur.execute("REPLACE INTO demo.counter VALUES (1, 0)")

    tally = {"lock": threading.Lock(), "acknowledged": 0, "retries": 0}
    errors = []
    clients = [
        threading.Thread(target=client, args=(s, args.count, snapshot_isolation, tally, errors))
        for s in args.sockets
    ]
    for c in clients:
        c.start()
    for c in clients:
        c.join()

    acknowledged = tally["acknowledged"]
    print(f"innodb_snapshot_isolation={snapshot_isolation}: {acknowledged} increments "
          f"acknowledged, {tally['retries']} conflicts retried")
    lost_on_some_node = False
    for socket in args.sockets:
        conn = connect(socket, snapshot_isolation)
        with conn.cursor() as cur:
            cur.execute("SET SESSION wsrep_sync_wait = 1")
            cur.execute("SELECT n FROM demo.counter WHERE id = 1")
            (n,) = cur.fetchone()
        lost = acknowledged - n
        print(f"  {socket}: counter {n}, lost updates {lost} ({100 * lost / max(acknowledged, 1):.1f} %)")
        lost_on_some_node |= lost != 0
    for e in errors:
        print(f"error not retried: {e}", file=sys.stderr)
    if errors or (lost_on_some_node and snapshot_isolation == "ON"):
        sys.exit(1)


if __name__ == "__main__":
    main()
