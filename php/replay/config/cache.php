<?php
return [
    'default' => 'redis',
    'stores' => [
        'redis' => ['driver' => 'redis', 'connection' => 'default'],
        'array' => ['driver' => 'array'],
    ],
    'prefix' => env('REDIS_PREFIX', 'onceonly-replay:') . 'cache',
];
