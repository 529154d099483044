<?php
return [
    'default' => 'redis',
    'connections' => [
        'redis' => [
            'driver' => 'redis',
            'connection' => 'default',
            'queue' => env('QUEUE_NAME', 'default'),
            // Longer than the longest job (its $timeout, or queue:work --timeout):
            // the worker's start check refuses anything else.
            'retry_after' => (int) env('QUEUE_RETRY_AFTER', 90),
            'block_for' => null,
            'after_commit' => false,
        ],
        'sync' => ['driver' => 'sync'],
    ],
    'failed' => ['driver' => 'null'],
];
