-- For the rest of this transaction only: no nested-loop joins. The batch
-- completion joins its keys to the claimed rows, and the planner's estimate of
-- claimed rows comes from statistics taken while they were queued (often 1
-- row): on that estimate it nests a rescan of every key inside a scan of every
-- claimed row, which is quadratic (seconds, then minutes, for a few thousand
-- rows, long enough for leases to run out). A hash join is linear.
SET LOCAL enable_nestloop = off
