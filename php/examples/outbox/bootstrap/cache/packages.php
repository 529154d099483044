<?php return array (
);