<?php
return [
    'connection' => env('ONCEONLY_CONNECTION'),
    'jobs' => array_values(array_filter(explode(',', (string) env('ONCEONLY_JOBS', 'App\Jobs\SendReceipt,App\Jobs\CreditLedger')))),
];
