#!/usr/bin/env bash
# Sets everything up, ingests the bundled example corpus into an embedded store and answers a question.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DB="surrealkv://.surreal-kgrag-example"
.venv/bin/surreal-kgrag ingest examples/data --db "$DB"
.venv/bin/surreal-kgrag stats --db "$DB"
.venv/bin/surreal-kgrag query "In which city was the discoverer of polonium born?" --db "$DB" -k 3
