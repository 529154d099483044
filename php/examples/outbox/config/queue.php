<?php
// The seed's settings: `php artisan queue:work redis --timeout=600 --tries=3 --backoff=30`
// with retry_after 900, longer than the longest job. The worker's start
// check (onceonly) refuses to run when retry_after is not longer than
// --timeout, or the lease (SendOutbox::onceonly()) not longer than it.
return [
    'default' => 'redis',
    'connections' => [
        'redis' => [
            'driver' => 'redis',
            'connection' => 'default',
            'queue' => 'default',
            'retry_after' => (int) env('QUEUE_RETRY_AFTER', 900),
            'block_for' => null,
        ],
    ],
    'failed' => ['driver' => 'null'],
];
