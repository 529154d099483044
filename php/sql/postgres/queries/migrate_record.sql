INSERT INTO onceonly.migrations (version, name) VALUES ($1, $2)
