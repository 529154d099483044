SELECT ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) AS now
