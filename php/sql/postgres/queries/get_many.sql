-- get.sql for many operations: the rows of the given ($2 job type, $3 key)
-- pairs that exist, each with the database's time.
SELECT ops.*, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) AS now
FROM unnest($2::text[], $3::text[]) AS k(job_type, op_key)
JOIN onceonly.ops AS ops ON ops.job_type = k.job_type AND ops.op_key = k.op_key
