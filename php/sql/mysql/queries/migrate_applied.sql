SELECT version FROM onceonly_migrations WHERE version = ?
