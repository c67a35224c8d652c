package provider

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// sealedPrefix starts every sealed secret and names its format, so a later
// format can be told apart from this one (and from a value never sealed).
const sealedPrefix = "kms1:"

const (
	dataKeySize = 32 // AES-256
	nonceSize   = 12 // the GCM standard nonce
	tagSize     = 16 // the GCM tag, appended to the ciphertext
)

// b64 is unpadded base64url, strict so that a changed character in the
// unused low bits of a segment's last character is refused rather than
// decoded to the same bytes.
var b64 = base64.RawURLEncoding.Strict()

// ErrInvalidSealed is wrapped by Open's error when the sealed string cannot
// be opened whatever is retried: it is not in a known format, was altered,
// or was sealed under another encryption context. Other Open errors (KMS
// unreachable, throttled, access denied) may pass on a retry.
var ErrInvalidSealed = errors.New("not a valid sealed secret for this context")

// Sealer seals secrets (an org's OpenAI or Anthropic API keys) for storage
// by envelope encryption: each secret is encrypted here with AES-256-GCM
// under a fresh data key from KMS, and the data key is kept only encrypted
// under the KMS key, next to the ciphertext. Opening one takes a KMS
// Decrypt, so whoever reads the table without KMS access learns nothing.
//
// A sealed secret is one printable string:
//
//	kms1:<encrypted data key>.<nonce>.<ciphertext>
//
// each part base64url without padding (RFC 4648 §5), so the string holds no
// character other than A–Z a–z 0–9 - _ . and the colon of the prefix. The
// encrypted data key is KMS's CiphertextBlob; the nonce is 12 random bytes;
// the ciphertext is AES-256-GCM's output with its 16-byte tag at the end.
// The GCM additional data encodes the encryption context (additionalData).
type Sealer struct {
	client *kms.Client
	keyID  string
}

// NewSealer returns a Sealer that seals under keyID: a key ID, key ARN,
// alias name (alias/…) or alias ARN. Open does not need keyID: KMS finds
// the key from the encrypted data key.
func NewSealer(client *kms.Client, keyID string) *Sealer {
	return &Sealer{client: client, keyID: keyID}
}

// Seal encrypts plaintext under a new data key and returns the sealed
// string (see Sealer). encryptionContext is the KMS encryption context,
// e.g. the org_id and secret_id the secret is stored under: Open must be
// given the same pairs, so a sealed string copied to another org or secret
// does not open. It is not secret (CloudTrail logs it) and is not in the
// string.
func (s *Sealer) Seal(ctx context.Context, plaintext string, encryptionContext map[string]string) (string, error) {
	out, err := s.client.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId:             aws.String(s.keyID),
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: encryptionContext,
	})
	if err != nil {
		return "", fmt.Errorf("seal secret: generate data key under %s: %w", s.keyID, err)
	}
	// The only copy of the plaintext key we can reach; the SDK's response
	// buffers and the cipher's key schedule are beyond it.
	defer clear(out.Plaintext)
	if len(out.Plaintext) != dataKeySize || len(out.CiphertextBlob) == 0 {
		return "", fmt.Errorf("seal secret: KMS returned a %d-byte data key and a %d-byte encrypted one, want %d and some",
			len(out.Plaintext), len(out.CiphertextBlob), dataKeySize)
	}
	gcm, err := newGCM(out.Plaintext)
	if err != nil {
		return "", fmt.Errorf("seal secret: %w", err)
	}
	// A data key seals one secret only, so the nonce could never repeat
	// under it; random anyway, as GCM is usually used.
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal secret: nonce: %w", err)
	}
	msg := []byte(plaintext)
	defer clear(msg)
	sealed := gcm.Seal(nil, nonce, msg, additionalData(encryptionContext))
	return sealedPrefix + b64.EncodeToString(out.CiphertextBlob) + "." + b64.EncodeToString(nonce) + "." + b64.EncodeToString(sealed), nil
}

// Open returns the plaintext of a string made by Seal with the same
// encryption context. When the string is malformed, altered or sealed
// under another context, the error wraps ErrInvalidSealed.
func (s *Sealer) Open(ctx context.Context, sealed string, encryptionContext map[string]string) (string, error) {
	plaintext, err := s.open(ctx, sealed, encryptionContext)
	if err != nil {
		return "", fmt.Errorf("open secret: %w", err)
	}
	return plaintext, nil
}

func (s *Sealer) open(ctx context.Context, sealed string, encryptionContext map[string]string) (string, error) {
	encryptedKey, nonce, ciphertext, err := parseSealed(sealed)
	if err != nil {
		return "", err
	}
	// No KeyId: KMS reads the key from the blob, so secrets sealed before
	// an alias was moved to a new key still open. Which keys this service
	// may decrypt with is for its IAM policy to say.
	out, err := s.client.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob:    encryptedKey,
		EncryptionContext: encryptionContext,
	})
	if err != nil {
		// KMS says InvalidCiphertext for another context as well as for
		// an altered blob: it cannot tell them apart either.
		var invalid *types.InvalidCiphertextException
		if errors.As(err, &invalid) {
			return "", fmt.Errorf("decrypt data key: %w: %w", ErrInvalidSealed, err)
		}
		return "", fmt.Errorf("decrypt data key: %w", err)
	}
	defer clear(out.Plaintext)
	if len(out.Plaintext) != dataKeySize {
		return "", fmt.Errorf("decrypt data key: %w: the data key has %d bytes, want %d", ErrInvalidSealed, len(out.Plaintext), dataKeySize)
	}
	gcm, err := newGCM(out.Plaintext)
	if err != nil {
		return "", err
	}
	msg, err := gcm.Open(nil, nonce, ciphertext, additionalData(encryptionContext))
	if err != nil {
		return "", fmt.Errorf("%w: ciphertext altered or sealed under another context (%w)", ErrInvalidSealed, err)
	}
	defer clear(msg)
	return string(msg), nil
}

// parseSealed splits a sealed string into its parts. Its errors never quote
// the input: a value stored before sealing existed would be a raw API key.
func parseSealed(sealed string) (encryptedKey, nonce, ciphertext []byte, err error) {
	rest, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: it does not start with %q", ErrInvalidSealed, sealedPrefix)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return nil, nil, nil, fmt.Errorf("%w: %d dot-separated parts after the prefix, want 3", ErrInvalidSealed, len(parts))
	}
	var decoded [3][]byte
	for i, name := range []string{"encrypted data key", "nonce", "ciphertext"} {
		decoded[i], err = b64.DecodeString(parts[i])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %s is not unpadded base64url: %w", ErrInvalidSealed, name, err)
		}
	}
	encryptedKey, nonce, ciphertext = decoded[0], decoded[1], decoded[2]
	switch {
	case len(encryptedKey) == 0:
		return nil, nil, nil, fmt.Errorf("%w: the encrypted data key is empty", ErrInvalidSealed)
	case len(nonce) != nonceSize:
		return nil, nil, nil, fmt.Errorf("%w: the nonce has %d bytes, want %d", ErrInvalidSealed, len(nonce), nonceSize)
	case len(ciphertext) < tagSize:
		return nil, nil, nil, fmt.Errorf("%w: the ciphertext has %d bytes, shorter than its tag", ErrInvalidSealed, len(ciphertext))
	}
	return encryptedKey, nonce, ciphertext, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("data key: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("data key: %w", err)
	}
	return gcm, nil
}

// additionalData binds the ciphertext to the encryption context a second
// time, besides KMS binding the data key to it, so a copied secret does not
// open even through a KMS (or emulator) that ignored the context. It is
// the prefix, then each pair in key order as a 4-byte big-endian length
// and the bytes of the key, then the same for the value.
func additionalData(encryptionContext map[string]string) []byte {
	ad := []byte(sealedPrefix)
	keys := slices.Sorted(maps.Keys(encryptionContext))
	for _, k := range keys {
		for _, s := range []string{k, encryptionContext[k]} {
			ad = binary.BigEndian.AppendUint32(ad, uint32(len(s)))
			ad = append(ad, s...)
		}
	}
	return ad
}

// EnsureKey returns the ID of the KMS key behind alias (alias/<name>),
// first creating a symmetric encryption key with that alias if there is
// none. The key must be enabled and symmetric: one pending deletion or
// disabled is an error rather than a second key.
//
// In real AWS a customer managed key costs about 1 USD a month (prorated
// by the hour) for as long as it exists, plus 0.03 USD per 10,000 requests
// beyond the free tier's 20,000 a month; Seal and Open make one request
// each. A key pending deletion is not billed.
//
// Safe to call from several processes at once: each may create a key, but
// only one alias can be created; a process that loses that race uses the
// winner's key and schedules deletion of its own, unused key after the
// minimum 7-day window.
func EnsureKey(ctx context.Context, client *kms.Client, alias string) (keyID string, err error) {
	name, ok := strings.CutPrefix(alias, "alias/")
	if !ok || name == "" {
		return "", fmt.Errorf("ensure KMS key: %q is not an alias name (alias/<name>)", alias)
	}
	// AWS keeps alias/aws/ for the keys its services create.
	if strings.HasPrefix(name, "aws/") {
		return "", fmt.Errorf("ensure KMS key: %q is reserved for AWS managed keys", alias)
	}
	keyID, err = keyBehind(ctx, client, alias)
	var notFound *types.NotFoundException
	switch {
	case err == nil:
		return keyID, nil
	case !errors.As(err, &notFound):
		return "", err
	}

	created, err := client.CreateKey(ctx, &kms.CreateKeyInput{
		KeySpec:     types.KeySpecSymmetricDefault,
		KeyUsage:    types.KeyUsageTypeEncryptDecrypt,
		Description: aws.String("transit: envelope encryption of stored secrets (" + alias + ")"),
	})
	if err != nil {
		return "", fmt.Errorf("ensure KMS key %s: create key: %w", alias, err)
	}
	ours := aws.ToString(created.KeyMetadata.KeyId)
	_, err = client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(ours)})
	if err == nil {
		return ours, nil
	}
	// From here the key we created is unused, and would be billed monthly.
	var exists *types.AlreadyExistsException
	if !errors.As(err, &exists) {
		if derr := discardKey(ctx, client, ours); derr != nil {
			return "", fmt.Errorf("ensure KMS key %s: create alias: %w; and %w", alias, err, derr)
		}
		return "", fmt.Errorf("ensure KMS key %s: create alias: %w", alias, err)
	}
	if err := discardKey(ctx, client, ours); err != nil {
		return "", fmt.Errorf("ensure KMS key %s: another process created the alias first: %w", alias, err)
	}
	return keyBehind(ctx, client, alias)
}

// keyBehind describes the key alias names. Its error wraps KMS's
// NotFoundException when there is no such alias.
func keyBehind(ctx context.Context, client *kms.Client, alias string) (string, error) {
	out, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
	if err != nil {
		return "", fmt.Errorf("ensure KMS key %s: describe: %w", alias, err)
	}
	meta := out.KeyMetadata
	if meta.KeyState != types.KeyStateEnabled {
		return "", fmt.Errorf("ensure KMS key %s: its key %s is %s, not Enabled", alias, aws.ToString(meta.KeyId), meta.KeyState)
	}
	// The spec alone, as a SYMMETRIC_DEFAULT key is always for
	// ENCRYPT_DECRYPT; moto leaves KeyUsage empty when CreateKey had none.
	if meta.KeySpec != types.KeySpecSymmetricDefault {
		return "", fmt.Errorf("ensure KMS key %s: its key %s is a %s key, want %s", alias, aws.ToString(meta.KeyId), meta.KeySpec, types.KeySpecSymmetricDefault)
	}
	return aws.ToString(meta.KeyId), nil
}

// discardKey schedules deletion of a key nothing uses yet, after the
// shortest window KMS allows. It does so even when ctx has ended, since
// the caller's failure is often why the key is left over.
func discardKey(ctx context.Context, client *kms.Client, keyID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := client.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: aws.String(keyID), PendingWindowInDays: aws.Int32(7)})
	if err != nil {
		return fmt.Errorf("schedule deletion of the unused key %s (delete it by hand, it costs about 1 USD a month): %w", keyID, err)
	}
	return nil
}
