<?php
return [
    // The jobs whose timing queue:work checks before it takes a job.
    'jobs' => [App\Jobs\SendOutbox::class],
];
