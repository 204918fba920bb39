#!/bin/sh
# The first step of the pipeline: one child of an array on the CPU pool prepares one shard of
# the data on the shared file system, where the training job that waits for the array reads it.
shard="$AWS_BATCH_JOB_ARRAY_INDEX"
mkdir -p "$LAUNCHER_EFS/shards"
echo "tokens of shard $shard" > "$LAUNCHER_EFS/shards/$shard"
echo "prepared shard $shard on $(nproc) vCPUs"
