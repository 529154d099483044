INSERT INTO onceonly_migrations (version, name) VALUES (?, ?)
