#!/bin/bash
# Says it started (tests wait for this line), then overruns the run's time limit.
echo "sleeper agent: started"
sleep 3600
