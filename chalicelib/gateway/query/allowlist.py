"""Which DuckDB functions and relations a federated query may use: an allow-list, as data.

Every function of DuckDB's catalog (``duckdb_functions()`` of a query sandbox) is classified here, once per
kind: *expression* functions (scalar, aggregate, window, macro: called in a select list, a filter, ...) and
*table* functions (table, table macro, pragma: called in FROM). A name is allowed only when a group of its
kind below lists it; the reason of each group says why. ``tests/unit/gateway/test_query_allowlist.py``
fails when DuckDB's catalog holds a function that is in no group (an upgrade brought it: classify it), or
one in both lists. Names are whitespace-separated and lower case (a catalog name's spaces become ``_``);
a ``*`` in a word with letters matches any run of characters (used only for generated families: collations, engine internals).

Relations are checked too: DuckDB's built-in views (``pg_settings``, ``duckdb_databases``, ...) and the
``system``/``temp`` catalogs and the ``pg_catalog`` schema describe the engine, not the caller's data, and
may not be named; ``information_schema``, ``duckdb_tables`` and ``duckdb_columns`` describe only the
sandbox's own tables (the caller's datasets) and stay readable.
"""
from __future__ import annotations

import fnmatch

EXPRESSION, TABLE = "expression", "table"

# kind -> reason -> names
ALLOWED: dict[str, dict[str, str]] = {
    EXPRESSION: {
        "Operators the parser emits for SQL syntax (arithmetic, comparison, LIKE as ~~, ||, ->>, ...)": """
        != !~~ !~~* % & && * ** + - ->> / // < <-> << <= <=> <@ = > >= >> @ @> ^ ^@ | || ~ ~~ ~~* ~~~
        is_distinct_from is_not_distinct_from""",
        "Value functions: compute from their arguments only (math, text, regex, hashing, dates, lists, maps, "
        "structs, unions, JSON and variant values, geometry, casts, conditionals, random values)": """
        abs acos acosh add age aggregate ago alias apply array_aggr array_aggregate array_append array_apply
        array_cat array_concat array_contains array_cosine_distance array_cosine_similarity
        array_cross_product array_distance array_distinct array_dot_product array_extract array_filter
        array_grade_up array_has array_has_all array_has_any array_indexof array_inner_product array_intersect
        array_length array_negative_dot_product array_negative_inner_product array_pop_back array_pop_front
        array_position array_prepend array_push_back array_push_front array_reduce array_resize array_reverse
        array_reverse_sort array_select array_slice array_sort array_to_json array_to_string
        array_to_string_comma_default array_transform array_unique array_value array_where array_zip ascii
        asin asinh assert_true atan atan2 atanh bar base64 bin binom bit_count bit_length bit_position
        bitstring bitstring_byte_comparable can_cast_implicitly cardinality cast_to_type cbrt ceil ceiling
        century char_length character_length chr concat concat_ws constant_or_null contains cos cosh cot
        create_sort_key current_date current_localtime current_localtimestamp damerau_levenshtein date_add
        date_diff date_part date_sub date_trunc datediff datepart datesub datetrunc day dayname dayofmonth
        dayofweek dayofyear days_in_month decade decimal_division decode degrees divide editdist3 element_at
        encode ends_with enum_code enum_first enum_last enum_range enum_range_boundary epoch epoch_ms epoch_ns
        epoch_us equi_width_bins era error even exp factorial fdiv filter flatten floor fmod format
        format_bytes formatreadabledecimalsize formatreadablesize from_base64 from_binary from_hex from_json
        from_json_strict gamma gcd gen_random_uuid generate_series generate_subscripts geomean geometric_mean
        get_bit get_current_time get_current_timestamp get_type grade_up greatest greatest_common_divisor
        hamming hash hex hive_partition_component hour if ilike_escape instr invoke is_histogram_other_bin
        isfinite isinf isnan isodow isoyear jaccard jaro_similarity jaro_winkler_similarity json json_array
        json_array_length json_contains json_copy_strftime_if_date json_copy_strftime_if_timestamp
        json_deep_merge json_exists json_extract json_extract_path json_extract_path_text json_extract_string
        json_group_array json_group_object json_group_structure json_insert json_keys json_merge_patch
        json_merge_patch_diff json_normalize json_object json_pretty json_quote json_remove json_replace
        json_set json_strip_nulls json_structure json_transform json_transform_strict json_type json_valid
        json_value julian last_day lcase lcm least least_common_multiple left left_grapheme len length
        length_grapheme levenshtein lgamma like_escape list_aggr list_aggregate list_any_value list_append
        list_apply list_approx_count_distinct list_avg list_bit_and list_bit_or list_bit_xor list_bool_and
        list_bool_or list_cat list_concat list_contains list_cosine_distance list_cosine_similarity list_count
        list_distance list_distinct list_dot_product list_element list_entropy list_extract list_filter
        list_first list_grade_up list_has list_has_all list_has_any list_histogram list_indexof
        list_inner_product list_intersect list_kurtosis list_kurtosis_pop list_last list_mad list_max
        list_median list_min list_mode list_negative_dot_product list_negative_inner_product list_pack
        list_position list_prepend list_product list_reduce list_resize list_reverse list_reverse_sort
        list_select list_sem list_skewness list_slice list_sort list_stddev_pop list_stddev_samp
        list_string_agg list_sum list_transform list_unique list_value list_var_pop list_var_samp list_where
        list_zip ln log log10 log2 lower lpad ltrim make_date make_time make_timestamp make_timestamp_ms
        make_timestamp_ns make_timestamptz make_type map map_concat map_contains map_contains_entry
        map_contains_value map_entries map_extract map_extract_value map_from_entries map_keys map_values md5
        md5_number md5_number_lower md5_number_upper microsecond millennium millisecond minute mismatches mod
        month monthname multiply nanosecond nextafter nfc_normalize normalized_interval not_ilike_escape
        not_like_escape now nullif octet_length ord overlay parse_dirname parse_dirpath parse_filename
        parse_formatted_bytes parse_path path_join pg_size_pretty pg_typeof pi position pow power prefix
        printf quarter radians random range reduce regexp_escape regexp_extract regexp_extract_all
        regexp_full_match regexp_matches regexp_replace regexp_split_to_array regexp_split_to_table
        remap_struct repeat replace replace_type reverse right right_grapheme round round_even roundbankers
        row row_to_json rpad rtrim second set_bit sha1 sha256 sign signbit sin sinh split split_part sqrt
        st_asbinary st_asgeojson st_astext st_aswkb st_aswkt st_crs st_geomfromgeojson st_geomfromwkb
        st_intersects_extent st_setcrs starts_with str_split str_split_regex strftime string_split
        string_split_regex string_to_array strip_accents strlen strpos strptime struct_concat struct_contains
        struct_extract struct_extract_at struct_has struct_indexof struct_insert struct_keys struct_pack
        struct_position struct_update struct_values substr substring substring_grapheme subtract suffix switch
        tan tanh time_bucket timetz_byte_comparable timezone timezone_hour timezone_minute to_base to_base64
        to_binary to_centuries to_days to_decades to_hex to_hours to_json to_microseconds to_millennia
        to_milliseconds to_minutes to_months to_quarters to_seconds to_timestamp to_weeks to_years today
        transaction_timestamp translate trim trunc try_strptime typeof ucase unbin unhex unicode union_extract
        union_tag union_value unpivot_list upper url_decode url_encode uuid uuid_extract_timestamp
        uuid_extract_version uuidv4 uuidv7 variant_array_length variant_comparator variant_contains
        variant_exists variant_extract variant_extract_string variant_group_array variant_keys
        variant_normalize variant_type variant_typeof vertex_extract wavg week weekday weekofyear weighted_avg
        xor year yearweek""",
        "Aggregates over the query's own rows": """
        any_value approx_count_distinct approx_quantile approx_top_k arbitrary arg_max arg_max_null
        arg_max_nulls_last arg_min arg_min_null arg_min_nulls_last argmax argmin array_agg avg bit_and bit_or
        bit_xor bitstring_agg bool_and bool_or combine_aggr corr count count_if count_star countif covar_pop
        covar_samp decimal_average entropy favg first fsum group_concat histogram histogram_exact kahan_sum
        kurtosis kurtosis_pop last list listagg lttb mad max max_by mean median min min_by mode product
        quantile quantile_cont quantile_disc regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope
        regr_sxx regr_sxy regr_syy reservoir_quantile sem skewness stddev stddev_pop stddev_samp string_agg
        sum sum_no_overflow sumkahan var_pop var_samp variance variant_group_object""",
        "Window functions over the query's own rows": """
        cume_dist dense_rank fill first_value lag last_value lead nth_value ntile percent_rank rank rank_dense
        row_number""",
        "Constant names every DuckDB gives (duckdb, main, memory); SQL lets some be written without ()": """
        current_catalog current_database current_role current_schema current_schemas current_user session_user
        user""",
        "Collations: compare and sort text in a language's order": """
        collate_* icu_collate_* icu_sort_key""",
        "Syntax the binder handles itself (UNNEST in a select list), not in the function catalog": """
        unnest unlist""",
    },
    TABLE: {
        "Generate rows from their arguments only": """
        range generate_series unnest repeat repeat_row json_each json_tree""",
        "Fixed reference lists of the engine's time zone and calendar names": """
        pg_timezone_names icu_calendar_names""",
        "Describe the sandbox's own tables: the caller's datasets (as information_schema does)": """
        duckdb_tables duckdb_columns""",
    },
}


# kind -> reason -> names: what a query may not call
REFUSED: dict[str, dict[str, str]] = {
    EXPRESSION: {
        "Settings, variables, session and engine state (paths, query text, connection ids, version)": """
        current_connection_id current_query current_query_id current_setting current_transaction_id
        get_block_size getvariable in_search_path parse_duckdb_log_message pg_conf_load_time
        pg_postmaster_start_time txid_current version write_log""",
        "Catalog and privilege introspection (PostgreSQL compatibility)": """
        col_description format_pg_type format_type has_* index_key inet_client_addr inet_client_port
        inet_server_addr inet_server_port map_to_pg_oid obj_description pg_*_is_visible pg_get_constraintdef
        pg_get_expr pg_get_viewdef pg_has_role pg_is_other_temp_schema pg_my_temp_schema shobj_description""",
        "Sequences (state shared by every query of a sandbox)": """
        currval nextval setseed setval""",
        "SQL text in, SQL text or plans out": """
        json_deserialize_sql json_serialize_plan json_serialize_sql""",
        "Hold the sandbox's only thread without reading data": """
        pg_sleep sleep_ms""",
        "Engine internals: physical vectors, statistics, raw aggregate states and encodings": """
        !__postfix __between __cast __internal_* combine finalize stats to_aggregate_state
        variant_bytes_to_variant variant_to_parquet_variant vector_type""",
    },
    TABLE: {
        "Read files, blobs or other engines' data (the sandbox reads only its own loaded tables)": """
        add_parquet_key arrow_scan arrow_scan_dumb copy_database glob import_database pandas_scan
        parquet_bloom_probe parquet_file_metadata parquet_full_metadata parquet_kv_metadata parquet_metadata
        parquet_scan parquet_schema python_arrow_scan python_map_function read_blob read_csv read_csv_auto
        read_duckdb read_json read_json_auto read_json_objects read_json_objects_auto read_ndjson
        read_ndjson_auto read_ndjson_objects read_parquet read_single_csv_file read_single_json_file
        read_single_parquet_file read_text seq_scan sniff_csv""",
        "Run SQL given as text, or over a table named by text (the statement check would not see it)": """
        histogram histogram_values json_execute_serialized_sql query query_table summary""",
        "Describe the engine and its host: settings, directories, databases, catalog, memory, extensions, "
        "secrets, logs": """
        collations database_list database_size duckdb_approx_database_count duckdb_available_metrics
        duckdb_connection_count
        duckdb_constraints duckdb_coordinate_systems duckdb_databases duckdb_dependencies duckdb_dialects
        duckdb_eviction_queues duckdb_extension_repositories duckdb_extensions duckdb_external_file_cache
        duckdb_external_resource_types duckdb_external_resources duckdb_functions duckdb_grammar_extensions
        duckdb_indexes duckdb_keywords duckdb_log_contexts duckdb_logs duckdb_logs_parsed duckdb_memory
        duckdb_optimizers duckdb_prepared_statements duckdb_profiling_settings duckdb_schemas
        duckdb_secret_type_parameters duckdb_secret_types duckdb_secrets duckdb_sequences duckdb_settings
        duckdb_table_sample duckdb_temporary_files duckdb_triggers duckdb_types duckdb_variables duckdb_views
        extension_versions functions metadata_info platform pragma_* show show_databases show_tables
        show_tables_expanded storage_info table_info test_all_types test_vector_types user_agent version
        which_secret""",
        "Change engine state (checkpoints, logging, profiling, optimizers, external resources)": """
        checkpoint create_external_resource deregister_external_resource destroy_external_resource disable_*
        enable_* force_checkpoint register_external_resource register_external_resource_type
        truncate_duckdb_logs verify_parallelism""",
    },
}

# DuckDB's built-in views a query can name without a schema that describe only the sandbox's own tables
OWN_TABLE_VIEWS = frozenset({"duckdb_tables", "duckdb_columns"})
# the others, which describe the engine (its settings, databases, logs, types); the test compares both with
# the catalog
REFUSED_VIEWS = frozenset("""
    duckdb_constraints duckdb_databases duckdb_indexes duckdb_logs duckdb_schemas
    duckdb_types duckdb_views pg_am pg_attrdef pg_attribute pg_class pg_collation pg_constraint pg_database
    pg_depend pg_description pg_enum pg_index pg_indexes pg_namespace pg_prepared_statements pg_proc
    pg_sequence pg_sequences pg_settings pg_tables pg_tablespace pg_type pg_views pragma_database_list
    sqlite_master sqlite_schema sqlite_temp_master sqlite_temp_schema""".split())
# catalogs and schemas that hold only the engine's own views (information_schema, which describes only the
# sandbox's tables, stays readable)
REFUSED_SCOPES = frozenset({"system", "temp", "pg_catalog"})


def key(name: str) -> str:
    """How a catalog or parsed function name is compared with the lists."""
    return name.lower().replace(" ", "_")


def is_pattern(word: str) -> bool:
    """Whether a listed word is a pattern (``*`` and ``**`` are the operators)."""
    return "*" in word and any(c.isalpha() for c in word)


def _patterns(table: dict[str, dict[str, str]], kind: str) -> tuple[frozenset[str], tuple[str, ...]]:
    words = [w for names in table[kind].values() for w in names.split()]
    return frozenset(w for w in words if not is_pattern(w)), tuple(w for w in words if is_pattern(w))


_LISTS = {(which, kind): _patterns(table, kind) for which, table in (("allowed", ALLOWED), ("refused", REFUSED))
          for kind in (EXPRESSION, TABLE)}


def listed(table: str, kind: str, name: str) -> bool:
    """Whether ``name`` is in a group of ``ALLOWED`` (``table`` "allowed") or ``REFUSED`` of ``kind``."""
    exact, wild = _LISTS[(table, kind)]
    k = key(name)
    return k in exact or any(fnmatch.fnmatchcase(k, w) for w in wild)


def allowed(kind: str, name: str) -> bool:
    """A query may call ``name`` as a ``kind`` function: allowed by a group and refused by none."""
    return listed("allowed", kind, name) and not listed("refused", kind, name)
