package provider_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
	"transit/provider"
)

// kmsEndpoint is the emulator the KMS tests share: TRANSIT_TEST_ENDPOINT
// when set, else a moto server started by the first test that needs one
// and stopped by TestMain, so the provider's HTTP tests start none.
var kmsEndpoint struct {
	once sync.Once
	url  string
	err  error
	moto *emulator.Moto
}

func TestMain(m *testing.M) {
	code := m.Run()
	if kmsEndpoint.moto != nil {
		kmsEndpoint.moto.Stop()
	}
	os.Exit(code)
}

// kmsClient returns a KMS client on the shared emulator in region,
// sending its requests through httpClient when that is not nil.
func kmsClient(t *testing.T, region string, httpClient kms.HTTPClient) *kms.Client {
	t.Helper()
	kmsEndpoint.once.Do(func() {
		if kmsEndpoint.url = emulator.Endpoint(); kmsEndpoint.url != "" {
			return
		}
		kmsEndpoint.moto, kmsEndpoint.err = emulator.StartMoto(context.Background(), os.Getenv("TRANSIT_TEST_MOTO_LOG"))
		if kmsEndpoint.err == nil {
			kmsEndpoint.url = kmsEndpoint.moto.URL
		}
	})
	require.NoError(t, kmsEndpoint.err, "the KMS tests need moto server")
	return kms.New(kms.Options{
		Region:       region,
		BaseEndpoint: aws.String(kmsEndpoint.url),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   httpClient,
	})
}

// testAlias returns a new alias name under the test prefix, whose alias and
// key are removed when the test ends (the key after KMS's 7-day minimum).
func testAlias(t *testing.T, client *kms.Client) string {
	t.Helper()
	alias := "alias/" + emulator.TestPrefix + uuid.NewString()[:8]
	t.Cleanup(func() {
		ctx := context.Background()
		out, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
		if err != nil {
			return // the test never created it
		}
		_, err = client.DeleteAlias(ctx, &kms.DeleteAliasInput{AliasName: aws.String(alias)})
		assert.NoError(t, err, "delete alias %s", alias)
		if out.KeyMetadata.KeyState != types.KeyStatePendingDeletion {
			_, err = client.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: out.KeyMetadata.KeyId, PendingWindowInDays: aws.Int32(7)})
			assert.NoError(t, err, "schedule deletion of %s", aws.ToString(out.KeyMetadata.KeyId))
		}
	})
	return alias
}

// newSealer ensures a key under a new test alias and returns a Sealer on it.
func newSealer(t *testing.T, client *kms.Client) (*provider.Sealer, string) {
	t.Helper()
	alias := testAlias(t, client)
	keyID, err := provider.EnsureKey(context.Background(), client, alias)
	require.NoError(t, err)
	return provider.NewSealer(client, keyID), keyID
}

var orgSecret = map[string]string{"org_id": "org-1", "secret_id": "openai"}

func TestSealer_round_trip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := kmsClient(t, "us-east-1", nil)
	alias := testAlias(t, client)
	keyID, err := provider.EnsureKey(ctx, client, alias)
	require.NoError(t, err)
	described, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(keyID)})
	require.NoError(t, err)

	sealers := map[string]*provider.Sealer{
		"key_id":    provider.NewSealer(client, keyID),
		"key_arn":   provider.NewSealer(client, aws.ToString(described.KeyMetadata.Arn)),
		"alias":     provider.NewSealer(client, alias),
		"alias_arn": provider.NewSealer(client, strings.Replace(aws.ToString(described.KeyMetadata.Arn), ":key/"+keyID, ":"+alias, 1)),
	}
	plaintexts := map[string]string{
		"openai_key":    "sk-proj-" + strings.Repeat("Ab3_", 40),
		"anthropic_key": "sk-ant-api03-" + uuid.NewString(),
		"empty":         "",
		"unicode":       "clé 🔑 \x00 end",
		"long":          strings.Repeat("x", 64<<10),
	}
	for sealerName, sealer := range sealers {
		for name, plaintext := range plaintexts {
			t.Run(sealerName+"/"+name, func(t *testing.T) {
				sealed, err := sealer.Seal(ctx, plaintext, orgSecret)
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(sealed, "kms1:"), "version prefix: %.20s", sealed)

				got, err := sealer.Open(ctx, sealed, map[string]string{"secret_id": "openai", "org_id": "org-1"})
				require.NoError(t, err)
				assert.Equal(t, plaintext, got)
			})
		}
	}

	t.Run("a sealer on another key opens it too", func(t *testing.T) {
		// KMS finds the key from the encrypted data key, so secrets sealed
		// before an alias moves to a new key still open.
		sealed, err := sealers["key_id"].Seal(ctx, "sk-old", orgSecret)
		require.NoError(t, err)
		other, _ := newSealer(t, client)
		got, err := other.Open(ctx, sealed, orgSecret)
		require.NoError(t, err)
		assert.Equal(t, "sk-old", got)
	})
}

var sealedPattern = regexp.MustCompile(`^kms1:([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$`)

func TestSealer_sealed_string_hides_the_plaintext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := kmsClient(t, "us-east-1", nil)
	sealer, _ := newSealer(t, client)
	plaintext := "sk-proj-" + strings.ReplaceAll(uuid.NewString()+uuid.NewString(), "-", "")

	sealed, err := sealer.Seal(ctx, plaintext, orgSecret)
	require.NoError(t, err)

	parts := sealedPattern.FindStringSubmatch(sealed)
	require.NotNil(t, parts, "kms1:<key>.<nonce>.<ciphertext> in unpadded base64url: %s", sealed)
	var decoded [3][]byte
	for i, part := range parts[1:] {
		decoded[i], err = base64.RawURLEncoding.DecodeString(part)
		require.NoError(t, err)
	}
	assert.Len(t, decoded[1], 12, "nonce")
	assert.Len(t, decoded[2], len(plaintext)+16, "ciphertext and GCM tag")

	lower := strings.ToLower(sealed)
	assert.NotContains(t, lower, strings.ToLower(plaintext))
	assert.NotContains(t, lower, strings.ToLower(plaintext[len("sk-proj-"):]), "the key's random part")
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		// Every alignment: the plaintext could start at any byte of a part.
		for shift := range 3 {
			b64 := enc.EncodeToString(append(make([]byte, shift), plaintext...))
			inner := b64[4 : len(b64)-4] // leave out the characters mixing in neighbours
			assert.NotContains(t, sealed, inner, "base64 of the plaintext, shifted %d", shift)
		}
	}
	for i, part := range decoded {
		assert.False(t, bytes.Contains(part, []byte(plaintext)), "part %d holds the plaintext", i)
		assert.False(t, bytes.Contains(part, []byte(plaintext[len("sk-proj-"):len("sk-proj-")+16])), "part %d holds some of the plaintext", i)
	}

	t.Run("without the KMS key it does not open", func(t *testing.T) {
		// KMS keys are regional: the same account in another region has
		// no such key.
		elsewhere := provider.NewSealer(kmsClient(t, "eu-west-1", nil), "alias/unused")
		_, err := elsewhere.Open(ctx, sealed, orgSecret)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "open secret")
		assert.NotContains(t, err.Error(), plaintext)
	})
}

func TestSealer_open_with_another_context_fails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := kmsClient(t, "us-east-1", nil)
	sealer, _ := newSealer(t, client)
	sealed, err := sealer.Seal(ctx, "sk-ant-secret", orgSecret)
	require.NoError(t, err)

	others := map[string]map[string]string{
		"another_secret": {"org_id": "org-1", "secret_id": "anthropic"},
		"another_org":    {"org_id": "org-2", "secret_id": "openai"},
		"swapped_values": {"org_id": "openai", "secret_id": "org-1"},
		"extra_pair":     {"org_id": "org-1", "secret_id": "openai", "x": "y"},
		"missing_pair":   {"org_id": "org-1"},
		"none":           nil,
	}
	for name, other := range others {
		t.Run(name, func(t *testing.T) {
			got, err := sealer.Open(ctx, sealed, other)
			require.Error(t, err)
			assert.Empty(t, got)
			assert.ErrorIs(t, err, provider.ErrInvalidSealed)
			assert.True(t, strings.HasPrefix(err.Error(), "open secret: "), err.Error())
		})
	}

	got, err := sealer.Open(ctx, sealed, orgSecret)
	require.NoError(t, err, "the right context still opens it")
	assert.Equal(t, "sk-ant-secret", got)

	t.Run("KMS binds the data key to the context", func(t *testing.T) {
		// Not only the GCM additional data: KMS itself refuses the data key.
		parts := sealedPattern.FindStringSubmatch(sealed)
		require.NotNil(t, parts)
		blob, err := base64.RawURLEncoding.DecodeString(parts[1])
		require.NoError(t, err)
		_, err = client.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, EncryptionContext: others["another_secret"]})
		var invalid *types.InvalidCiphertextException
		require.ErrorAs(t, err, &invalid)
		out, err := client.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, EncryptionContext: orgSecret})
		require.NoError(t, err)
		assert.Len(t, out.Plaintext, 32, "an AES-256 data key")
	})
}

// contextIgnored rewrites every KMS Decrypt to carry one fixed encryption
// context, playing a KMS that does not check it. The request still reaches
// moto, which does not check signatures.
type contextIgnored struct {
	context map[string]string
}

func (c contextIgnored) Do(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") == "TrentService.Decrypt" {
		var body map[string]any
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			return nil, err
		}
		body["EncryptionContext"] = c.context
		raw, err = json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
		r.Header.Del("Content-Length")
	}
	return http.DefaultClient.Do(r)
}

// countingClient counts the KMS requests sent through it, by operation.
type countingClient struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
	c.mu.Unlock()
	return http.DefaultClient.Do(r)
}

func (c *countingClient) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

func TestSealer_context_is_bound_to_the_ciphertext_too(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sealer, keyID := newSealer(t, kmsClient(t, "us-east-1", nil))
	sealed, err := sealer.Seal(ctx, "sk-proj-copied", orgSecret)
	require.NoError(t, err)

	lax := provider.NewSealer(kmsClient(t, "us-east-1", contextIgnored{context: orgSecret}), keyID)
	got, err := lax.Open(ctx, sealed, orgSecret)
	require.NoError(t, err, "the rewriting client itself works")
	assert.Equal(t, "sk-proj-copied", got)

	// KMS hands out the data key, but the GCM additional data still holds
	// the context it was sealed under.
	got, err = lax.Open(ctx, sealed, map[string]string{"org_id": "org-2", "secret_id": "openai"})
	require.Error(t, err)
	assert.Empty(t, got)
	assert.ErrorIs(t, err, provider.ErrInvalidSealed)
	assert.Contains(t, err.Error(), "ciphertext altered or sealed under another context")
}

func TestSealer_tampered_sealed_string_fails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	counter := &countingClient{}
	client := kmsClient(t, "us-east-1", counter)
	sealer, _ := newSealer(t, client)
	// 18 bytes, so the ciphertext's 34 leave 4 unused bits in its last
	// base64 character.
	const plaintext = "sk-proj-tamper-me!"
	sealed, err := sealer.Seal(ctx, plaintext, orgSecret)
	require.NoError(t, err)
	parts := sealedPattern.FindStringSubmatch(sealed)
	require.NotNil(t, parts)
	key, nonce, ciphertext := parts[1], parts[2], parts[3]

	open := func(t *testing.T, s string) error {
		t.Helper()
		got, err := sealer.Open(ctx, s, orgSecret)
		if err == nil {
			return fmt.Errorf("opened to %q", got)
		}
		assert.Empty(t, got)
		assert.True(t, strings.HasPrefix(err.Error(), "open secret: "), err.Error())
		return err
	}

	t.Run("every character changed", func(t *testing.T) {
		// Each position once, including the last character of each part,
		// whose low bits base64 leaves unused.
		for i := len("kms1:"); i < len(sealed); i++ {
			if sealed[i] == '.' {
				continue
			}
			repl := byte('A')
			if sealed[i] == 'A' {
				repl = 'B'
			}
			tampered := sealed[:i] + string(repl) + sealed[i+1:]
			err := open(t, tampered)
			require.Error(t, err, "position %d", i)
			if i > len("kms1:")+len(key) {
				// Past the data key, KMS is not the one that notices.
				assert.ErrorIs(t, err, provider.ErrInvalidSealed, "position %d", i)
			}
		}
	})

	t.Run("an unused bit changed", func(t *testing.T) {
		// A lenient decoder reads the same bytes; the string was still
		// altered, so it must not open.
		require.NotZero(t, len(ciphertext)%4, "the ciphertext's last character has unused bits")
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, sealed[len(sealed)-1])
		tampered := sealed[:len(sealed)-1] + string(alphabet[last^1])
		err := open(t, tampered)
		require.Error(t, err)
		assert.ErrorIs(t, err, provider.ErrInvalidSealed)
	})

	// Only a well-formed string costs a KMS request.
	malformed := map[string]struct {
		sealed string
		kms    bool
	}{
		"empty":                {sealed: ""},
		"raw_api_key":          {sealed: plaintext},
		"unknown_prefix":       {sealed: "kms2:" + key + "." + nonce + "." + ciphertext},
		"no_prefix":            {sealed: key + "." + nonce + "." + ciphertext},
		"missing_part":         {sealed: "kms1:" + key + "." + ciphertext},
		"extra_part":           {sealed: sealed + "." + nonce},
		"parts_swapped":        {sealed: "kms1:" + key + "." + ciphertext + "." + nonce},
		"empty_key":            {sealed: "kms1:." + nonce + "." + ciphertext},
		"short_nonce":          {sealed: "kms1:" + key + "." + nonce[:8] + "." + ciphertext},
		"padded":               {sealed: sealed + "=="},
		"standard_base64":      {sealed: "kms1:" + key + "." + nonce + "." + ciphertext[:len(ciphertext)-1] + "+"},
		"ciphertext_too_short": {sealed: "kms1:" + key + "." + nonce + "." + ciphertext[:8]},
		"ciphertext_cut":       {sealed: "kms1:" + key + "." + nonce + "." + ciphertext[:len(ciphertext)-4], kms: true},
		"ciphertext_appended":  {sealed: sealed + "AAAA", kms: true},
	}
	for name, tc := range malformed {
		t.Run(name, func(t *testing.T) {
			before := counter.count("Decrypt")
			err := open(t, tc.sealed)
			require.Error(t, err)
			assert.ErrorIs(t, err, provider.ErrInvalidSealed)
			if !tc.kms {
				assert.Equal(t, before, counter.count("Decrypt"), "refused without asking KMS")
			}
			if name == "raw_api_key" {
				assert.NotContains(t, err.Error(), plaintext, "a stored raw key must not reach the logs")
			}
		})
	}

	got, err := sealer.Open(ctx, sealed, orgSecret)
	require.NoError(t, err, "the untouched string still opens")
	assert.Equal(t, plaintext, got)
}

func TestSealer_seals_the_same_plaintext_differently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sealer, _ := newSealer(t, kmsClient(t, "us-east-1", nil))

	first, err := sealer.Seal(ctx, "sk-proj-same", orgSecret)
	require.NoError(t, err)
	second, err := sealer.Seal(ctx, "sk-proj-same", orgSecret)
	require.NoError(t, err)

	assert.NotEqual(t, first, second)
	a, b := sealedPattern.FindStringSubmatch(first), sealedPattern.FindStringSubmatch(second)
	require.NotNil(t, a)
	require.NotNil(t, b)
	for i, name := range []string{"", "data key", "nonce", "ciphertext"} {
		if i > 0 {
			assert.NotEqual(t, a[i], b[i], "each seal has its own %s", name)
		}
	}
	for _, s := range []string{first, second} {
		got, err := sealer.Open(ctx, s, orgSecret)
		require.NoError(t, err)
		assert.Equal(t, "sk-proj-same", got)
	}
}

// aliasesNamed lists the aliases called name, with the keys they target.
func aliasesNamed(t *testing.T, client *kms.Client, name string) []types.AliasListEntry {
	t.Helper()
	var found []types.AliasListEntry
	pages := kms.NewListAliasesPaginator(client, &kms.ListAliasesInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		require.NoError(t, err)
		for _, a := range page.Aliases {
			if aws.ToString(a.AliasName) == name {
				found = append(found, a)
			}
		}
	}
	return found
}

func TestEnsureKey_is_idempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	counter := &countingClient{}
	client := kmsClient(t, "us-east-1", counter)
	alias := testAlias(t, client)
	require.Empty(t, aliasesNamed(t, client, alias))

	first, err := provider.EnsureKey(ctx, client, alias)
	require.NoError(t, err)
	require.NotEmpty(t, first)
	assert.Equal(t, 1, counter.count("CreateKey"))
	assert.Equal(t, 1, counter.count("CreateAlias"))
	second, err := provider.EnsureKey(ctx, client, alias)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	// Not merely the same answer: no key made and thrown away (each is
	// billed by the hour until deleted).
	assert.Equal(t, 1, counter.count("CreateKey"), "the second call creates nothing")
	assert.Equal(t, 1, counter.count("CreateAlias"))
	assert.Zero(t, counter.count("ScheduleKeyDeletion"))

	aliases := aliasesNamed(t, client, alias)
	require.Len(t, aliases, 1)
	assert.Equal(t, first, aws.ToString(aliases[0].TargetKeyId))
	described, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(first)})
	require.NoError(t, err)
	assert.Equal(t, types.KeyStateEnabled, described.KeyMetadata.KeyState)
	assert.Equal(t, types.KeySpecSymmetricDefault, described.KeyMetadata.KeySpec)
	assert.Equal(t, types.KeyUsageTypeEncryptDecrypt, described.KeyMetadata.KeyUsage)

	t.Run("an alias made elsewhere is used as it is", func(t *testing.T) {
		alias := testAlias(t, client)
		made, err := client.CreateKey(ctx, &kms.CreateKeyInput{})
		require.NoError(t, err)
		_, err = client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: made.KeyMetadata.KeyId})
		require.NoError(t, err)

		got, err := provider.EnsureKey(ctx, client, alias)
		require.NoError(t, err)
		assert.Equal(t, aws.ToString(made.KeyMetadata.KeyId), got)
	})

	t.Run("a key pending deletion is an error, not a second key", func(t *testing.T) {
		alias := testAlias(t, client)
		keyID, err := provider.EnsureKey(ctx, client, alias)
		require.NoError(t, err)
		_, err = client.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: aws.String(keyID), PendingWindowInDays: aws.Int32(7)})
		require.NoError(t, err)

		_, err = provider.EnsureKey(ctx, client, alias)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "PendingDeletion")
		aliases := aliasesNamed(t, client, alias)
		require.Len(t, aliases, 1)
		assert.Equal(t, keyID, aws.ToString(aliases[0].TargetKeyId))
	})

	t.Run("names that are no alias of ours are refused", func(t *testing.T) {
		for _, name := range []string{"", "transit-secrets", "alias/", "alias/aws/transit"} {
			_, err := provider.EnsureKey(ctx, client, name)
			assert.Error(t, err, "%q", name)
		}
	})
}

// heldAliases holds every CreateAlias until n have come, then lets them
// through one at a time, noting the key each one targets. That makes the
// race EnsureKey must survive (every process found no alias and created a
// key) happen on every run, and, serialised, it does not depend on moto's
// CreateAlias, which checks and inserts without a lock.
type heldAliases struct {
	n       int
	mu      sync.Mutex
	targets []string
	all     chan struct{}
	serial  sync.Mutex
}

func (h *heldAliases) Do(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") != "TrentService.CreateAlias" {
		return http.DefaultClient.Do(r)
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var body struct{ TargetKeyId string }
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.targets = append(h.targets, body.TargetKeyId)
	if len(h.targets) == h.n {
		close(h.all)
	}
	h.mu.Unlock()
	select {
	case <-h.all:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	h.serial.Lock()
	defer h.serial.Unlock()
	return http.DefaultClient.Do(r)
}

func TestEnsureKey_racing_processes_end_with_one_alias(t *testing.T) {
	t.Parallel()
	const racers = 8
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := &heldAliases{n: racers, all: make(chan struct{})}
	client := kmsClient(t, "us-east-1", held)
	alias := testAlias(t, client)

	keys := make([]string, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { keys[i], errs[i] = provider.EnsureKey(ctx, client, alias) })
	}
	wg.Wait()

	for i := range racers {
		require.NoError(t, errs[i], "racer %d", i)
		assert.Equal(t, keys[0], keys[i], "racer %d", i)
	}
	held.mu.Lock()
	targets := held.targets
	held.mu.Unlock()
	require.Len(t, targets, racers, "every racer created a key and tried the alias")
	assert.Contains(t, targets, keys[0])

	aliases := aliasesNamed(t, client, alias)
	require.Len(t, aliases, 1)
	assert.Equal(t, keys[0], aws.ToString(aliases[0].TargetKeyId))

	for _, keyID := range targets {
		described, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(keyID)})
		require.NoError(t, err)
		if keyID == keys[0] {
			assert.Equal(t, types.KeyStateEnabled, described.KeyMetadata.KeyState, "the winner's key")
			continue
		}
		assert.Equal(t, types.KeyStatePendingDeletion, described.KeyMetadata.KeyState, "a loser's key %s", keyID)
		if assert.NotNil(t, described.KeyMetadata.DeletionDate) {
			assert.WithinDuration(t, time.Now().Add(7*24*time.Hour), *described.KeyMetadata.DeletionDate, time.Hour, "the minimum window")
		}
	}

	sealer := provider.NewSealer(client, alias)
	sealed, err := sealer.Seal(ctx, "sk-after-race", orgSecret)
	require.NoError(t, err)
	got, err := sealer.Open(ctx, sealed, orgSecret)
	require.NoError(t, err)
	assert.Equal(t, "sk-after-race", got)
}
