<?php

declare(strict_types=1);

namespace Onceonly\Tests\Support;

use PHPUnit\Framework\TestCase;

/**
 * The test application (tests/app) on a database and a Redis prefix of its
 * own: artisan commands and real `queue:work` worker processes.
 */
final class LaravelApp
{
    public string $effects;
    public string $storage;
    /** @var list<resource> */
    private array $workers = [];

    /** @param array<string, string> $env */
    public function __construct(private readonly TestCase $t, public readonly string $database, public array $env = [])
    {
        $this->effects = tempnam(sys_get_temp_dir(), 'laravel-effects-');
        $this->storage = sys_get_temp_dir() . '/laravel-storage-' . bin2hex(random_bytes(4));
        mkdir($this->storage . '/logs', 0777, true);
        $this->env += [
            'DB_DATABASE' => $database,
            'REDIS_DB' => getenv('ONCEONLY_TEST_REDIS_DB') ?: '3',
            'REDIS_PREFIX' => 'laravel-' . bin2hex(random_bytes(4)) . ':',
            'QUEUE_RETRY_AFTER' => '5',
            'TEST_EFFECTS' => $this->effects,
            'APP_STORAGE' => $this->storage,
        ];
    }

    /** A fresh MySQL database with the tables and a ledger table; skipped (failed under CI) without MySQL or Redis. */
    public static function onMySql(TestCase $t, array $env = []): self
    {
        $url = Databases::mysqlUrl($t);
        $name = substr($url, strrpos($url, '/') + 1);
        $redis = @fsockopen('127.0.0.1', 6379, $errno, $errstr, 2);
        if (!$redis) {
            getenv('CI') === 'true' ? $t->fail("redis unreachable: $errstr") : $t->markTestSkipped("redis unreachable: $errstr");
        }
        fclose($redis);
        $app = new self($t, $name, $env);
        $app->artisanOk('onceonly:migrate');
        Databases::admin($t, 'mysql', fn (\PDO $db) => $db->exec("CREATE TABLE `$name`.ledger (entry VARCHAR(64) NOT NULL, amount INT NOT NULL)"));
        return $app;
    }

    public static function artisanPath(): string
    {
        return dirname(__DIR__) . '/app/artisan';
    }

    /**
     * @param array<string, string> $env
     * @return array{int, string, string}
     */
    public function artisan(array $env, string ...$args): array
    {
        $p = proc_open(array_merge([PHP_BINARY, self::artisanPath()], $args), [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $this->environment($env));
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        return [proc_close($p), $out, $err];
    }

    public function artisanOk(string ...$args): string
    {
        [$code, $out, $err] = $this->artisan([], ...$args);
        $this->t->assertSame(0, $code, 'artisan ' . implode(' ', $args) . " exited $code: $out$err");
        return $out;
    }

    /**
     * Starts `php artisan queue:work redis ARGS` in the background: its pid.
     *
     * @param array<string, string> $env
     */
    public function worker(array $env = [], string ...$args): int
    {
        $log = $this->storage . '/logs/worker-' . count($this->workers) . '.log';
        $p = proc_open(
            array_merge([PHP_BINARY, self::artisanPath(), 'queue:work', 'redis', '--sleep=1', '--timeout=4'], $args),
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']],
            $pipes,
            null,
            $this->environment($env),
        );
        $this->workers[] = $p;
        return proc_get_status($p)['pid'];
    }

    /** Waits for every worker started with --stop-when-empty to exit (at most $seconds). */
    public function waitForWorkers(float $seconds): void
    {
        $deadline = microtime(true) + $seconds;
        foreach ($this->workers as $p) {
            while (proc_get_status($p)['running']) {
                if (microtime(true) > $deadline) {
                    $this->t->fail("a worker still runs after {$seconds}s:\n" . $this->logs());
                }
                usleep(50_000);
            }
        }
    }

    /** Waits until the queue holds nothing (waiting, delayed or reserved), at most $seconds. */
    public function waitForQueue(float $seconds): void
    {
        $deadline = microtime(true) + $seconds;
        usleep(300_000);
        while ($this->queued() > 0) {
            if (microtime(true) > $deadline) {
                $this->t->fail("{$this->queued()} jobs still queued after {$seconds}s:\n" . $this->logs());
            }
            usleep(100_000);
        }
        usleep(300_000); // the last job's completion
    }

    /** The workers' output. */
    public function logs(): string
    {
        $out = '';
        foreach (glob($this->storage . '/logs/*.log') ?: [] as $f) {
            $out .= '== ' . basename($f) . "\n" . file_get_contents($f);
        }
        return $out;
    }

    /** @return list<array{string, string, int}> the effects: key, idempotency key, pid */
    public function effects(): array
    {
        $lines = array_filter(explode("\n", (string) file_get_contents($this->effects)));
        return array_values(array_map(static function (string $l) {
            [$k, $idem, $pid] = explode(' ', $l);
            return [$k, $idem, (int) $pid];
        }, $lines));
    }

    /** Jobs left in the queue (waiting, delayed or reserved). */
    public function queued(): int
    {
        $r = new \Redis();
        $r->connect('127.0.0.1', 6379);
        $r->select((int) $this->env['REDIS_DB']);
        $q = $this->env['REDIS_PREFIX'] . 'queues:default';
        return $r->lLen($q) + $r->zCard("$q:delayed") + $r->zCard("$q:reserved");
    }

    public function pdo(): \PDO
    {
        [$dsn, $user, $pass] = \Onceonly\Store\MySqlStore::dsn(Databases::mysqlHost() . '/' . $this->database);
        return new \PDO($dsn, $user, $pass, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
    }

    /** @return array<string, mixed>|null the record */
    public function record(string $job, string $key): ?array
    {
        $st = $this->pdo()->prepare('SELECT state, token, attempts, owner, external_ref, result, error FROM onceonly_ops WHERE job_type = ? AND op_key = ?');
        $st->execute([$job, $key]);
        return $st->fetch(\PDO::FETCH_ASSOC) ?: null;
    }

    public function stop(): void
    {
        foreach ($this->workers as $p) {
            $s = proc_get_status($p);
            if ($s['running']) {
                posix_kill($s['pid'], SIGKILL);
            }
            proc_close($p);
        }
        $this->workers = [];
        $r = new \Redis();
        $r->connect('127.0.0.1', 6379);
        $r->select((int) $this->env['REDIS_DB']);
        $keys = $r->keys($this->env['REDIS_PREFIX'] . '*');
        if ($keys) {
            $r->del($keys);
        }
    }

    /** @param array<string, string> $env */
    private function environment(array $env): array
    {
        return array_merge(getenv(), $this->env, $env);
    }
}
