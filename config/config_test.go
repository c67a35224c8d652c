package config_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
)

// resolve runs the production sequence (Bind, Parse, Resolve) against a
// fake environment, so no test depends on the real one.
func resolve(t *testing.T, args []string, env map[string]string) (config.Config, error) {
	t.Helper()
	var cfg config.Config
	fs := flag.NewFlagSet("transit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	binder := config.Bind(fs, &cfg)
	require.NoError(t, fs.Parse(args))
	err := binder.Resolve(&cfg, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	return cfg, err
}

// validConfig is the default configuration, which must itself be valid.
func validConfig(t *testing.T) config.Config {
	t.Helper()
	cfg, err := resolve(t, nil, nil)
	require.NoError(t, err)
	return cfg
}

func TestResolve_defaults_are_valid(t *testing.T) {
	cfg, err := resolve(t, nil, map[string]string{})
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())

	// The documented defaults; provision and serve both rely on them.
	assert.Equal(t, config.Config{
		Region:            "us-east-1",
		Prefix:            "transit",
		Concurrency:       4,
		CommandTimeout:    20 * time.Second,
		DrainTimeout:      30 * time.Second,
		VisibilityTimeout: time.Minute,
		MaxReceiveCount:   5,
		RetryMax:          3,
		RetryInitial:      100 * time.Millisecond,
		AuditRetention:    30 * 24 * time.Hour,
		LayerRetention:    7 * 24 * time.Hour,
		// Off: on AWS only a TTL removal deletes the Lambda layer version.
		LayerDeleteOnAnyRemove: false,
		ProviderTimeout:        10 * time.Second,
		CleanupMaxAttempts:     10,
		CleanupBackoff:         time.Minute,
		CleanupBackoffMax:      time.Hour,
		SweepInterval:          time.Minute,
		SandboxExpiry:          "timer",
		TimerShards:            8,
		TimerLease:             15 * time.Second,
		TimerPollInterval:      time.Second,
		Env:                    config.EnvProduction,
		TaskLease:              2 * time.Minute,
		TaskMaxAttempts:        3,
		AgentStaleAfter:        90 * time.Second,
		AgentOfflineAfter:      5 * time.Minute,
		LogLevel:               "info",
		LogFormat:              "text",
		HTTPAddr:               ":9090",
		// On demand: nothing to size until the traffic is known.
		Capacity: config.CapacityOnDemand,
	}, cfg)
}

func TestResolve_env_fills_setting(t *testing.T) {
	tests := []struct {
		Name  string
		Env   map[string]string
		Check func(t *testing.T, cfg config.Config)
	}{
		{
			Name:  "region",
			Env:   map[string]string{"AWS_REGION": "eu-west-1"},
			Check: func(t *testing.T, cfg config.Config) { assert.Equal(t, "eu-west-1", cfg.Region) },
		},
		{
			Name:  "prefix",
			Env:   map[string]string{"TRANSIT_PREFIX": "stack_b-2"},
			Check: func(t *testing.T, cfg config.Config) { assert.Equal(t, "stack_b-2", cfg.Prefix) },
		},
		{
			Name:  "concurrency",
			Env:   map[string]string{"TRANSIT_CONCURRENCY": "16"},
			Check: func(t *testing.T, cfg config.Config) { assert.Equal(t, 16, cfg.Concurrency) },
		},
		{
			Name: "timeouts",
			Env: map[string]string{
				"TRANSIT_COMMAND_TIMEOUT":    "45s",
				"TRANSIT_VISIBILITY_TIMEOUT": "2m",
				"TRANSIT_DRAIN_TIMEOUT":      "5s",
				"TRANSIT_PROVIDER_TIMEOUT":   "3s",
			},
			Check: func(t *testing.T, cfg config.Config) {
				assert.Equal(t, 45*time.Second, cfg.CommandTimeout)
				assert.Equal(t, 2*time.Minute, cfg.VisibilityTimeout)
				assert.Equal(t, 5*time.Second, cfg.DrainTimeout)
				assert.Equal(t, 3*time.Second, cfg.ProviderTimeout)
			},
		},
		{
			Name: "retries",
			Env:  map[string]string{"TRANSIT_MAX_RECEIVE_COUNT": "9", "TRANSIT_RETRY_MAX": "0", "TRANSIT_RETRY_INITIAL": "250ms"},
			Check: func(t *testing.T, cfg config.Config) {
				assert.Equal(t, 9, cfg.MaxReceiveCount)
				assert.Equal(t, 0, cfg.RetryMax)
				assert.Equal(t, 250*time.Millisecond, cfg.RetryInitial)
			},
		},
		{
			Name:  "audit_retention",
			Env:   map[string]string{"TRANSIT_AUDIT_RETENTION": "48h"},
			Check: func(t *testing.T, cfg config.Config) { assert.Equal(t, 48*time.Hour, cfg.AuditRetention) },
		},
		{
			Name:  "layer_delete_on_any_remove",
			Env:   map[string]string{"TRANSIT_LAYER_DELETE_ON_ANY_REMOVE": "true"},
			Check: func(t *testing.T, cfg config.Config) { assert.True(t, cfg.LayerDeleteOnAnyRemove) },
		},
		{
			Name: "provider_url",
			Env:  map[string]string{"TRANSIT_PROVIDER_URL": "https://provider.example:8443/api"},
			Check: func(t *testing.T, cfg config.Config) {
				assert.Equal(t, "https://provider.example:8443/api", cfg.ProviderURL)
			},
		},
		{
			Name: "cleanup_policy",
			Env:  map[string]string{"TRANSIT_CLEANUP_MAX_ATTEMPTS": "3", "TRANSIT_CLEANUP_BACKOFF": "30s", "TRANSIT_CLEANUP_BACKOFF_MAX": "10m"},
			Check: func(t *testing.T, cfg config.Config) {
				assert.Equal(t, 3, cfg.CleanupMaxAttempts)
				assert.Equal(t, 30*time.Second, cfg.CleanupBackoff)
				assert.Equal(t, 10*time.Minute, cfg.CleanupBackoffMax)
			},
		},
		{
			Name:  "sweep_interval_zero_disables",
			Env:   map[string]string{"TRANSIT_SWEEP_INTERVAL": "0s"},
			Check: func(t *testing.T, cfg config.Config) { assert.Equal(t, time.Duration(0), cfg.SweepInterval) },
		},
		{
			Name:  "log_level",
			Env:   map[string]string{"TRANSIT_LOG_LEVEL": "debug"},
			Check: func(t *testing.T, cfg config.Config) { assert.Equal(t, "debug", cfg.LogLevel) },
		},
		{
			Name: "capacity",
			Env:  map[string]string{"TRANSIT_CAPACITY": "provisioned", "TRANSIT_TABLE_CAPACITY": "Tasks=50/40,Logs=200/100"},
			Check: func(t *testing.T, cfg config.Config) {
				assert.Equal(t, config.CapacityProvisioned, cfg.Capacity)
				assert.Equal(t, "Tasks=50/40,Logs=200/100", cfg.TableCapacity)
			},
		},
		{
			// An exported-but-empty variable must not wipe out the default.
			Name: "empty_value_keeps_default",
			Env:  map[string]string{"TRANSIT_PREFIX": "", "TRANSIT_CONCURRENCY": ""},
			Check: func(t *testing.T, cfg config.Config) {
				assert.Equal(t, "transit", cfg.Prefix)
				assert.Equal(t, 4, cfg.Concurrency)
			},
		},
		{
			// The SDK reads AWS_ENDPOINT_URL itself; copying it into the
			// flag would override the per-service variables.
			Name:  "endpoint_url_not_read_from_env",
			Env:   map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"},
			Check: func(t *testing.T, cfg config.Config) { assert.Empty(t, cfg.EndpointURL) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			cfg, err := resolve(t, nil, tc.Env)
			require.NoError(t, err)
			tc.Check(t, cfg)
		})
	}
}

func TestResolve_flag_beats_env(t *testing.T) {
	env := map[string]string{"TRANSIT_PREFIX": "from-env", "TRANSIT_CONCURRENCY": "9", "TRANSIT_LOG_LEVEL": "error"}

	cfg, err := resolve(t, []string{"--prefix", "from-flag", "--concurrency=2", "--endpoint-url", "http://localhost:4566"}, env)
	require.NoError(t, err)
	assert.Equal(t, "from-flag", cfg.Prefix)
	assert.Equal(t, 2, cfg.Concurrency)
	assert.Equal(t, "http://localhost:4566", cfg.EndpointURL)
	assert.Equal(t, "error", cfg.LogLevel, "settings without a flag still come from the env")
}

func TestResolve_capacity_flags_beat_env(t *testing.T) {
	cfg, err := resolve(t, []string{"--capacity=provisioned", "--table-capacity", "Logs=200/100"},
		map[string]string{"TRANSIT_CAPACITY": "on-demand", "TRANSIT_TABLE_CAPACITY": "Tasks=50/40"})
	require.NoError(t, err)
	assert.Equal(t, config.CapacityProvisioned, cfg.Capacity)
	assert.Equal(t, "Logs=200/100", cfg.TableCapacity)
}

func TestResolve_bool_flag_beats_env(t *testing.T) {
	cfg, err := resolve(t, []string{"--layer-delete-on-any-remove=false"}, map[string]string{"TRANSIT_LAYER_DELETE_ON_ANY_REMOVE": "true"})
	require.NoError(t, err)
	assert.False(t, cfg.LayerDeleteOnAnyRemove)
	cfg, err = resolve(t, []string{"--layer-delete-on-any-remove"}, nil)
	require.NoError(t, err)
	assert.True(t, cfg.LayerDeleteOnAnyRemove, "the bare flag turns it on")
}

func TestResolve_bad_bool_flag_names_the_setting(t *testing.T) {
	var cfg config.Config
	fs := flag.NewFlagSet("transit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	config.Bind(fs, &cfg)
	err := fs.Parse([]string{"--layer-delete-on-any-remove=maybe"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "layer-delete-on-any-remove")
}

func TestResolve_flag_set_to_default_still_beats_env(t *testing.T) {
	// Being set, not differing from the default, is what makes a flag win.
	cfg, err := resolve(t, []string{"--concurrency=4"}, map[string]string{"TRANSIT_CONCURRENCY": "9"})
	require.NoError(t, err)
	assert.Equal(t, 4, cfg.Concurrency)
}

func TestResolve_rejects_bad_env_value(t *testing.T) {
	tests := []struct {
		Name    string
		Env     map[string]string
		WantErr []string
	}{
		{Name: "concurrency_not_a_number", Env: map[string]string{"TRANSIT_CONCURRENCY": "abc"}, WantErr: []string{"TRANSIT_CONCURRENCY", `"abc"`}},
		{Name: "drain_timeout_not_a_duration", Env: map[string]string{"TRANSIT_DRAIN_TIMEOUT": "soon"}, WantErr: []string{"TRANSIT_DRAIN_TIMEOUT", `"soon"`}},
		{Name: "bool_not_a_bool", Env: map[string]string{"TRANSIT_LAYER_DELETE_ON_ANY_REMOVE": "maybe"}, WantErr: []string{"TRANSIT_LAYER_DELETE_ON_ANY_REMOVE", `"maybe"`}},
		{Name: "duration_without_unit", Env: map[string]string{"TRANSIT_COMMAND_TIMEOUT": "30"}, WantErr: []string{"TRANSIT_COMMAND_TIMEOUT"}},
		{
			Name:    "both_reported_together",
			Env:     map[string]string{"TRANSIT_CONCURRENCY": "abc", "TRANSIT_DRAIN_TIMEOUT": "soon"},
			WantErr: []string{"TRANSIT_CONCURRENCY", "TRANSIT_DRAIN_TIMEOUT"},
		},
		// Parsed fine but invalid: Resolve must go on to validate.
		{Name: "log_level_out_of_range", Env: map[string]string{"TRANSIT_LOG_LEVEL": "loud"}, WantErr: []string{"TRANSIT_LOG_LEVEL"}},
		{Name: "concurrency_out_of_range", Env: map[string]string{"TRANSIT_CONCURRENCY": "0"}, WantErr: []string{"TRANSIT_CONCURRENCY"}},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := resolve(t, nil, tc.Env)
			require.Error(t, err)
			for _, want := range tc.WantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestValidate_names_the_broken_setting(t *testing.T) {
	tests := []struct {
		Name              string
		ModifyValidConfig func(*config.Config)
		WantEnv           string
	}{
		{Name: "region_empty", ModifyValidConfig: func(c *config.Config) { c.Region = "" }, WantEnv: "AWS_REGION"},
		{Name: "endpoint_url_without_scheme", ModifyValidConfig: func(c *config.Config) { c.EndpointURL = "localhost:5000" }, WantEnv: "--endpoint-url"},
		{Name: "endpoint_url_not_http", ModifyValidConfig: func(c *config.Config) { c.EndpointURL = "ftp://localhost:5000" }, WantEnv: "--endpoint-url"},
		{Name: "endpoint_url_without_host", ModifyValidConfig: func(c *config.Config) { c.EndpointURL = "http://" }, WantEnv: "--endpoint-url"},
		{Name: "prefix_empty", ModifyValidConfig: func(c *config.Config) { c.Prefix = "" }, WantEnv: "TRANSIT_PREFIX"},
		{Name: "prefix_with_dot", ModifyValidConfig: func(c *config.Config) { c.Prefix = "my.stack" }, WantEnv: "TRANSIT_PREFIX"},
		{Name: "prefix_too_long", ModifyValidConfig: func(c *config.Config) { c.Prefix = strings.Repeat("p", 41) }, WantEnv: "TRANSIT_PREFIX"},
		{Name: "concurrency_zero", ModifyValidConfig: func(c *config.Config) { c.Concurrency = 0 }, WantEnv: "TRANSIT_CONCURRENCY"},
		{Name: "concurrency_over_1000", ModifyValidConfig: func(c *config.Config) { c.Concurrency = 1001 }, WantEnv: "TRANSIT_CONCURRENCY"},
		{Name: "command_timeout_zero", ModifyValidConfig: func(c *config.Config) { c.CommandTimeout = 0 }, WantEnv: "TRANSIT_COMMAND_TIMEOUT"},
		{Name: "drain_timeout_negative", ModifyValidConfig: func(c *config.Config) { c.DrainTimeout = -time.Second }, WantEnv: "TRANSIT_DRAIN_TIMEOUT"},
		{Name: "visibility_equal_to_command_timeout", ModifyValidConfig: func(c *config.Config) { c.VisibilityTimeout = c.CommandTimeout }, WantEnv: "TRANSIT_VISIBILITY_TIMEOUT"},
		{Name: "visibility_within_a_second_of_command_timeout", ModifyValidConfig: func(c *config.Config) { c.CommandTimeout = c.VisibilityTimeout - 300*time.Millisecond }, WantEnv: "TRANSIT_VISIBILITY_TIMEOUT"},
		{Name: "visibility_below_command_timeout", ModifyValidConfig: func(c *config.Config) { c.VisibilityTimeout = c.CommandTimeout - time.Second }, WantEnv: "TRANSIT_VISIBILITY_TIMEOUT"},
		{Name: "visibility_not_whole_seconds", ModifyValidConfig: func(c *config.Config) { c.VisibilityTimeout = 90*time.Second + 500*time.Millisecond }, WantEnv: "TRANSIT_VISIBILITY_TIMEOUT"},
		{Name: "visibility_over_12h", ModifyValidConfig: func(c *config.Config) { c.VisibilityTimeout = 12*time.Hour + time.Second }, WantEnv: "TRANSIT_VISIBILITY_TIMEOUT"},
		{Name: "max_receive_count_zero", ModifyValidConfig: func(c *config.Config) { c.MaxReceiveCount = 0 }, WantEnv: "TRANSIT_MAX_RECEIVE_COUNT"},
		{Name: "max_receive_count_over_1000", ModifyValidConfig: func(c *config.Config) { c.MaxReceiveCount = 1001 }, WantEnv: "TRANSIT_MAX_RECEIVE_COUNT"},
		{Name: "retry_max_negative", ModifyValidConfig: func(c *config.Config) { c.RetryMax = -1 }, WantEnv: "TRANSIT_RETRY_MAX"},
		{Name: "retry_max_over_20", ModifyValidConfig: func(c *config.Config) { c.RetryMax = 21 }, WantEnv: "TRANSIT_RETRY_MAX"},
		{Name: "retry_initial_zero", ModifyValidConfig: func(c *config.Config) { c.RetryInitial = 0 }, WantEnv: "TRANSIT_RETRY_INITIAL"},
		{Name: "layer_retention_under_1m", ModifyValidConfig: func(c *config.Config) { c.LayerRetention = 59 * time.Second }, WantEnv: "TRANSIT_LAYER_RETENTION"},
		{Name: "audit_retention_under_1h", ModifyValidConfig: func(c *config.Config) { c.AuditRetention = 59 * time.Minute }, WantEnv: "TRANSIT_AUDIT_RETENTION"},
		{Name: "provider_url_not_a_url", ModifyValidConfig: func(c *config.Config) { c.ProviderURL = "provider:8080" }, WantEnv: "TRANSIT_PROVIDER_URL"},
		{Name: "provider_url_relative", ModifyValidConfig: func(c *config.Config) { c.ProviderURL = "/sandboxes" }, WantEnv: "TRANSIT_PROVIDER_URL"},
		{Name: "provider_timeout_zero", ModifyValidConfig: func(c *config.Config) { c.ProviderTimeout = 0 }, WantEnv: "TRANSIT_PROVIDER_TIMEOUT"},
		{Name: "cleanup_max_attempts_zero", ModifyValidConfig: func(c *config.Config) { c.CleanupMaxAttempts = 0 }, WantEnv: "TRANSIT_CLEANUP_MAX_ATTEMPTS"},
		{Name: "cleanup_max_attempts_over_1000", ModifyValidConfig: func(c *config.Config) { c.CleanupMaxAttempts = 1001 }, WantEnv: "TRANSIT_CLEANUP_MAX_ATTEMPTS"},
		{Name: "cleanup_backoff_under_a_second", ModifyValidConfig: func(c *config.Config) { c.CleanupBackoff = 999 * time.Millisecond; c.CleanupBackoffMax = time.Second }, WantEnv: "TRANSIT_CLEANUP_BACKOFF"},
		{Name: "cleanup_backoff_max_below_backoff", ModifyValidConfig: func(c *config.Config) { c.CleanupBackoffMax = c.CleanupBackoff - time.Second }, WantEnv: "TRANSIT_CLEANUP_BACKOFF_MAX"},
		{Name: "cleanup_backoff_max_over_30_days", ModifyValidConfig: func(c *config.Config) { c.CleanupBackoffMax = 721 * time.Hour }, WantEnv: "TRANSIT_CLEANUP_BACKOFF_MAX"},
		{Name: "sweep_interval_negative", ModifyValidConfig: func(c *config.Config) { c.SweepInterval = -time.Minute }, WantEnv: "TRANSIT_SWEEP_INTERVAL"},
		{Name: "sandbox_expiry_unknown", ModifyValidConfig: func(c *config.Config) { c.SandboxExpiry = "never" }, WantEnv: "TRANSIT_SANDBOX_EXPIRY"},
		{Name: "timer_shards_zero", ModifyValidConfig: func(c *config.Config) { c.TimerShards = 0 }, WantEnv: "TRANSIT_TIMER_SHARDS"},
		{Name: "timer_lease_short", ModifyValidConfig: func(c *config.Config) { c.TimerLease, c.TimerPollInterval = 500*time.Millisecond, 100*time.Millisecond }, WantEnv: "TRANSIT_TIMER_LEASE"},
		{Name: "timer_poll_not_below_lease", ModifyValidConfig: func(c *config.Config) { c.TimerPollInterval = c.TimerLease }, WantEnv: "TRANSIT_TIMER_POLL_INTERVAL"},
		{Name: "log_level_unknown", ModifyValidConfig: func(c *config.Config) { c.LogLevel = "verbose" }, WantEnv: "TRANSIT_LOG_LEVEL"},
		{Name: "log_level_empty", ModifyValidConfig: func(c *config.Config) { c.LogLevel = "" }, WantEnv: "TRANSIT_LOG_LEVEL"},
		{Name: "log_format_unknown", ModifyValidConfig: func(c *config.Config) { c.LogFormat = "xml" }, WantEnv: "TRANSIT_LOG_FORMAT"},
		{Name: "http_addr_without_port", ModifyValidConfig: func(c *config.Config) { c.HTTPAddr = "localhost" }, WantEnv: "TRANSIT_HTTP_ADDR"},
		{Name: "http_addr_port_out_of_range", ModifyValidConfig: func(c *config.Config) { c.HTTPAddr = ":99999" }, WantEnv: "TRANSIT_HTTP_ADDR"},
		{Name: "capacity_unknown", ModifyValidConfig: func(c *config.Config) { c.Capacity = "reserved" }, WantEnv: "TRANSIT_CAPACITY"},
		{Name: "capacity_misspelt", ModifyValidConfig: func(c *config.Config) { c.Capacity = "ondemand" }, WantEnv: "TRANSIT_CAPACITY"},
		{Name: "table_capacity_unknown_table", ModifyValidConfig: provisioned("Task=50/40"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		{Name: "table_capacity_without_write", ModifyValidConfig: provisioned("Tasks=50"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		{Name: "table_capacity_without_name", ModifyValidConfig: provisioned("50/40"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		{Name: "table_capacity_not_a_number", ModifyValidConfig: provisioned("Tasks=fifty/40"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		{Name: "table_capacity_zero_units", ModifyValidConfig: provisioned("Tasks=0/40"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		{Name: "table_capacity_over_quota", ModifyValidConfig: provisioned("Logs=40001/100"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		{Name: "table_capacity_table_twice", ModifyValidConfig: provisioned("Tasks=50/40,Tasks=60/40"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		{Name: "table_capacity_empty_item", ModifyValidConfig: provisioned("Tasks=50/40,"), WantEnv: "TRANSIT_TABLE_CAPACITY"},
		// Overrides would be silently ignored on demand.
		{Name: "table_capacity_on_demand", ModifyValidConfig: func(c *config.Config) { c.TableCapacity = "Tasks=50/40" }, WantEnv: "TRANSIT_TABLE_CAPACITY"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			cfg := validConfig(t)
			tc.ModifyValidConfig(&cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.WantEnv)
			// One broken field, one problem: the others must not be blamed.
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestValidate_accepts_boundary_values(t *testing.T) {
	tests := []struct {
		Name              string
		ModifyValidConfig func(*config.Config)
	}{
		{Name: "endpoint_and_provider_urls", ModifyValidConfig: func(c *config.Config) {
			c.EndpointURL = "http://127.0.0.1:5000"
			c.ProviderURL = "https://provider.example/api/"
		}},
		{Name: "prefix_40_chars", ModifyValidConfig: func(c *config.Config) { c.Prefix = strings.Repeat("p", 40) }},
		{Name: "concurrency_bounds", ModifyValidConfig: func(c *config.Config) { c.Concurrency = 1000; c.MaxReceiveCount = 1 }},
		{Name: "visibility_one_second_over_command_timeout", ModifyValidConfig: func(c *config.Config) { c.VisibilityTimeout = c.CommandTimeout + time.Second }},
		{Name: "visibility_12h", ModifyValidConfig: func(c *config.Config) { c.VisibilityTimeout = 12 * time.Hour }},
		{Name: "no_retries_no_sweeps", ModifyValidConfig: func(c *config.Config) { c.RetryMax = 0; c.SweepInterval = 0 }},
		{Name: "retry_max_20", ModifyValidConfig: func(c *config.Config) { c.RetryMax = 20 }},
		{Name: "audit_retention_1h", ModifyValidConfig: func(c *config.Config) { c.AuditRetention = time.Hour }},
		{Name: "cleanup_one_attempt_one_second", ModifyValidConfig: func(c *config.Config) {
			c.CleanupMaxAttempts, c.CleanupBackoff, c.CleanupBackoffMax = 1, time.Second, time.Second
		}},
		{Name: "cleanup_1000_attempts_30_days", ModifyValidConfig: func(c *config.Config) { c.CleanupMaxAttempts, c.CleanupBackoffMax = 1000, 720*time.Hour }},
		{Name: "expiry_by_sweep", ModifyValidConfig: func(c *config.Config) { c.SandboxExpiry = "sweep" }},
		{Name: "every_log_level", ModifyValidConfig: func(c *config.Config) { c.LogLevel = "warn" }},
		{Name: "provisioned_with_design_figures", ModifyValidConfig: provisioned("")},
		{Name: "table_capacity_bounds_and_spaces", ModifyValidConfig: provisioned(" Tasks=1/40000 , NucleusAppTable=40000/1,timers=5/5")},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			cfg := validConfig(t)
			tc.ModifyValidConfig(&cfg)
			assert.NoError(t, cfg.Validate())
		})
	}
}

// provisioned sets provisioned capacity with the overrides given.
func provisioned(overrides string) func(*config.Config) {
	return func(c *config.Config) {
		c.Capacity = config.CapacityProvisioned
		c.TableCapacity = overrides
	}
}

func TestValidate_table_capacity_names_each_bad_override(t *testing.T) {
	cfg := validConfig(t)
	provisioned("Task=50/40,Logs=200/100,Queue=1/x")(&cfg)
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TRANSIT_TABLE_CAPACITY (--table-capacity)")
	assert.Contains(t, err.Error(), `no table "Task"`)
	assert.Contains(t, err.Error(), `"Queue=1/x"`)
	assert.NotContains(t, err.Error(), "Logs=200/100", "the valid override is not blamed")
}

func TestValidate_reports_all_problems_together(t *testing.T) {
	cfg := validConfig(t)
	cfg.Prefix = ""
	cfg.Concurrency = 0
	cfg.LogLevel = "loud"
	cfg.ProviderURL = "nope"

	err := cfg.Validate()
	require.Error(t, err)
	// An operator should fix everything in one go, not one error per start.
	for _, env := range []string{"TRANSIT_PREFIX", "TRANSIT_CONCURRENCY", "TRANSIT_LOG_LEVEL", "TRANSIT_PROVIDER_URL"} {
		assert.Contains(t, err.Error(), env)
	}
	assert.Len(t, strings.Split(err.Error(), "\n"), 4)
}

func TestValidate_names_flag_alongside_variable(t *testing.T) {
	cfg := validConfig(t)
	cfg.RetryMax = 99
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TRANSIT_RETRY_MAX (--retry-max)")
}
