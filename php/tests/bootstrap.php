<?php
require __DIR__ . '/../autoload.php';
