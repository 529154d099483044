SELECT *, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) AS now FROM onceonly.ops WHERE job_type = $2 AND op_key = $3
