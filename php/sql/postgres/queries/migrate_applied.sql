SELECT version FROM onceonly.migrations WHERE version = $1
