"""A standby server that takes over: one active among servers on one PostgreSQL.

Nomenclature:
- *lease*: the one row of ``server_lease`` (``models.ServerLease``): ``epoch``, ``holder`` (a
  server id), ``url`` (where the holder answers) and ``expires_at`` (the
  database's clock). The *active* holds an unexpired lease and renews it every
  ``renew_s`` for ``ttl_s``; every other server is a *standby*.
- *take-over*: a standby, finding the lease expired (or its own, left by a
  previous process of the same home), locks the row ``FOR UPDATE``, bumps
  ``epoch``, names itself holder and commits (``lease.LeaseStore.acquire``).
- *fence*: the epoch a server believes it holds, valid on its own clock until
  ``renewal sent + ttl_s - margin`` (``fence.Fence``). Every write transaction
  of the server checks it in the database right before its ``COMMIT``.

Invariants:
- Election is the database's: the row lock serialises take-overs, so two
  standbys racing for an expired lease make two epochs one after the other and
  only the later holds it; the earlier's renewal then finds the row moved
  (``WHERE epoch = :mine`` matches nothing) and it steps down.
- **No split brain, by construction** (the fencing argument). Each write
  transaction W of a server, right before its COMMIT, runs
  ``SELECT 1 FROM server_lease WHERE id = 1 AND epoch = :mine FOR KEY SHARE``
  on its own connection and aborts (``NotActive``) when no row comes back. The
  epoch changes only in a take-over T, which first locks the row ``FOR UPDATE``
  (a lock that conflicts with ``FOR KEY SHARE``; the renewal's plain UPDATE of
  ``expires_at`` does not, so renewals never wait for writers). Either W locked
  the row first: T waits until W has committed, so W's writes precede the new
  epoch; or T locked it first: W waits until T commits, then PostgreSQL
  re-reads the newest row version (READ COMMITTED's re-check; REPEATABLE READ
  fails with a serialization error instead), finds another epoch, and W aborts
  with nothing written. So the committed writes of epoch e all precede the
  commit of e+1, whatever the clocks, the network or a paused process do: an
  old active, however late, cannot commit a write after it was replaced.
- A server that cannot renew stops acting before anyone may replace it: its
  fence lapses at ``sent + ttl_s - margin`` on its own clock, while the row's
  ``expires_at`` is at least ``sent + ttl_s`` on the database's (the UPDATE ran
  after it was sent); from then on its writes are refused without asking the
  database, and the watchdog stops its loops. The margin covers clock-rate
  drift, not offsets: no two clocks are compared.
- A take-over ends the old holder's database sessions
  (``pg_terminate_backend`` on its ``application_name``): a partitioned server
  cut off mid-commit, holding its ``FOR KEY SHARE`` lock until TCP notices,
  cannot hold up the new active; its transaction rolls back.
- Only writes pay for fencing: a transaction that ran nothing but SELECTs
  commits unchecked; one that wrote costs one extra round trip.

Limits: the backends' own side effects (starting a supervisor over SSH, a
``scancel``) are not fenced by the database: an old active's call already in
flight when its lease lapses still happens; its result is not recorded (the
write is refused) and the new active reconciles from the nodes. SQLite serves
one server only (``ringleader.home``'s lock); the lease is PostgreSQL's.
"""
