<?php
// The guard's cost next to the same job unguarded, through real
// `php artisan queue:work redis` workers of the test application
// (tests/app): SendReceipt (guarded: opaque/hold, MariaDB) and PlainReceipt
// (the same handle(), no middleware), N distinct jobs each, drained by the
// same number of workers, alternating which goes first in each round.
//
//   php php/bench/queue_work_bench.php [--jobs 300] [--rounds 3] [--workers 1] [--db mysql|pgsql]
//
// Prints one line per drain and the medians; the figures are in docs/benchmarks.md.
declare(strict_types=1);

$opt = getopt('', ['jobs:', 'rounds:', 'workers:', 'db:']);
$jobs = (int) ($opt['jobs'] ?? 300);
$rounds = (int) ($opt['rounds'] ?? 3);
$workers = (int) ($opt['workers'] ?? 1);
$db = (string) ($opt['db'] ?? 'mysql');
$artisan = dirname(__DIR__) . '/tests/app/artisan';
$name = 'laravel_bench_' . bin2hex(random_bytes(3));
$effects = tempnam(sys_get_temp_dir(), 'laravel-bench-');
$env = array_merge(getenv(), [
    'DB_CONNECTION' => $db, 'DB_DATABASE' => $name, 'PG_DATABASE' => 'laravel_php', 'PG_ONCEONLY_SCHEMA' => $name,
    'REDIS_DB' => getenv('ONCEONLY_TEST_REDIS_DB') ?: '3', 'REDIS_PREFIX' => "$name:", 'QUEUE_RETRY_AFTER' => '30',
    'TEST_EFFECTS' => $effects, 'TEST_EFFECT' => 'opaque', 'ONCEONLY_JOBS' => 'App\Jobs\SendReceipt',
]);

$run = static function (array $args, bool $quiet = true) use ($artisan, $env): float {
    $t = microtime(true);
    $p = proc_open(array_merge([PHP_BINARY, $artisan], $args), [1 => ['file', '/dev/null', 'w'], 2 => $quiet ? ['file', '/dev/null', 'w'] : STDERR], $pipes, null, $env);
    $code = proc_close($p);
    if ($code !== 0) {
        fwrite(STDERR, 'artisan ' . implode(' ', $args) . " exited $code\n");
        exit(1);
    }
    return microtime(true) - $t;
};
$drain = static function () use ($artisan, $env, $workers): float {
    $t = microtime(true);
    $ps = [];
    for ($i = 0; $i < $workers; $i++) {
        $ps[] = proc_open([PHP_BINARY, $artisan, 'queue:work', 'redis', '--stop-when-empty', '--timeout=4', '--sleep=1'],
            [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes, null, $env);
    }
    foreach ($ps as $p) {
        proc_close($p);
    }
    return microtime(true) - $t;
};

if ($db === 'mysql') {
    (new PDO('mysql:host=127.0.0.1', 'root', ''))->exec("CREATE DATABASE `$name`");
}
$run(['onceonly:migrate']);
$empty = $drain(); // a worker's start and stop with nothing to do
printf("queue:work start+stop, empty queue: %.0f ms (%d worker%s)\n", $empty * 1000, $workers, $workers > 1 ? 's' : '');
$times = ['PlainReceipt' => [], 'SendReceipt' => []];
for ($r = 0; $r < $rounds; $r++) {
    $order = $r % 2 ? ['SendReceipt', 'PlainReceipt'] : ['PlainReceipt', 'SendReceipt'];
    foreach ($order as $job) {
        $run(['test:dispatch', $job, "r$r$job", "--times=$jobs", '--distinct']);
        $t = $drain();
        $times[$job][] = $t;
        printf("round %d %-12s %d jobs in %.2f s: %.2f ms/job (%.0f jobs/s)\n", $r + 1, $job, $jobs, $t, ($t - $empty) * 1000 / $jobs, $jobs / ($t - $empty));
    }
}
$median = static function (array $xs): float {
    sort($xs);
    return $xs[intdiv(count($xs), 2)];
};
$plain = ($median($times['PlainReceipt']) - $empty) * 1000 / $jobs;
$guarded = ($median($times['SendReceipt']) - $empty) * 1000 / $jobs;
$lines = count(file($effects));
printf("median: unguarded %.2f ms/job, guarded %.2f ms/job: the guard costs %.2f ms per job (%s, %d worker%s, %d effects for %d jobs)\n",
    $plain, $guarded, $guarded - $plain, $db === 'mysql' ? 'MariaDB 10.11' : 'PostgreSQL', $workers, $workers > 1 ? 's' : '', $lines, 2 * $jobs * $rounds);
if ($db === 'mysql') {
    (new PDO('mysql:host=127.0.0.1', 'root', ''))->exec("DROP DATABASE `$name`");
} else {
    (new PDO('pgsql:host=127.0.0.1;dbname=laravel_php', 'postgres'))->exec("DROP SCHEMA \"$name\" CASCADE");
}
