#!/usr/bin/env python3
"""usage: serve_feed.py FILE RATE SPEED

Appends flows to FILE as a live source would: RATE lines a wall second, event time running
SPEED times faster than the wall clock from the file's last timestamp, over the demo's 20,000
ordinary users, until killed."""
import random, sys, time
path, rate, speed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(path, "rb") as f:
    f.seek(-200, 2)
    last = int(f.read().splitlines()[-1].split(b",")[0])
rnd = random.Random(5)
t0 = time.time()
sent = 0
with open(path, "a") as f:
    while True:
        now = time.time()
        due = int((now - t0) * rate)
        ts = last + 1 + int((now - t0) * speed)
        lines = []
        for _ in range(due - sent):
            u = rnd.randrange(20000)
            lines.append(f"{ts},10.2.{u // 250}.{u % 250 + 1},10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(1, 255)},{rnd.choice((80, 443, 22, 53))}\n")
        f.write("".join(lines)); f.flush()
        sent = due
        time.sleep(0.05)
