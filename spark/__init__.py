"""Read RocketMQ 4.9.x store directories with PySpark (rmqd's and Apache RocketMQ's alike).

Local use::

    from rmqd.spark.session import get_session, read
    spark = get_session("local[2]")          # registers the "rocketmq" data source
    msgs = read(spark, "/path/to/store", "commitlog")
    # same as spark.read.format("rocketmq").option("kind", "commitlog").load("/path/to/store")

Kinds: ``commitlog`` (one row per message, every stored field), ``consumequeue`` (one row per
unit), ``index`` (one row per index entry) and ``problems`` (file-level integrity findings);
options and partitioning are described in spark/datasource.py, the schemas in spark/schemas.py.

Command line: ``rmqd spark verify STORE [--against OTHER] [--master URL]`` and
``rmqd spark export STORE OUT --format parquet`` (spark/cli.py; ``python -m rmqd.spark.cli`` works too).

On a cluster, unchanged through spark-submit: ship rmqd's pure-Python packages and make the
store readable under the same path on every executor (NFS, or a copy per node), e.g.::

    rmqd spark package /tmp/rmqd.zip     # rmqd/{spark,store,wire}; prints the path of spark/cli.py
    spark-submit --master spark://host:7077 --py-files /tmp/rmqd.zip .../rmqd/spark/cli.py verify /shared/store
    spark-submit --master spark://host:7077 --py-files /tmp/rmqd.zip .../rmqd/spark/cli.py export /shared/store /shared/out

(spark/cli.py run as a script takes ``verify|export`` then the same arguments as the rmqd
sub-commands; a job of your own can call ``rmqd.spark.cli.verify_main(argv)`` the same way.)

Executors need numpy, pyarrow and construct installed (rmqd's ``spark`` extra; its isal makes
the body CRC ~3.5x faster and is optional: without it zlib computes the same values).

Spark gives a Python data source no column pruning: every column of the schema is computed and
converted into the JVM's rows. A job that needs a few columns names them with ``.schema(...)``
and the others are never computed (see spark/datasource.py). Without
``--master`` the CLI uses spark-submit's master, else ``local[*]``.
"""
