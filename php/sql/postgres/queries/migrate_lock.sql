-- Held until the migrating transaction ends: two processes migrating the same
-- schema at once apply each migration once. $1 is derived from the schema name.
SELECT pg_advisory_xact_lock($1)
