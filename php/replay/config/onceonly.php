<?php
return ['jobs' => []];
