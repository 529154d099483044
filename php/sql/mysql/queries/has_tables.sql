SELECT CAST(table_name AS CHAR) FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name = 'onceonly_ops'
